"""Who is in which channel (`conversations.members`), for restricted KBs in DMs: the application layer asks.

A successful answer is kept for a minute, so someone removed from a channel loses its KBs in their DMs
within that time; a failed lookup raises and is never kept (the application layer then fails closed).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)

MEMBERSHIP_TTL_S = 60.0


class MembershipUnavailable(RuntimeError):
    pass


class SlackMembership:
    def __init__(self, client: WebClient, ttl_s: float = MEMBERSHIP_TTL_S):
        self.client = client
        self.ttl_s = ttl_s
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def channel_members(self, channel: str) -> frozenset[str]:
        now = time.monotonic()
        with self._lock:
            cached = self._members.get(channel)
        if cached and now - cached[0] < self.ttl_s:
            return cached[1]
        members: set[str] = set()
        try:
            for page in self.client.conversations_members(channel=channel, limit=1000):  # Slack's pagination
                members.update(page.get("members") or [])
        except SlackApiError as exc:
            raise MembershipUnavailable(f"conversations.members {channel}: {exc.response.get('error')}") from None
        except OSError as exc:
            raise MembershipUnavailable(f"conversations.members {channel}: {exc}") from None
        result = frozenset(members)
        with self._lock:
            self._members[channel] = (now, result)
        return result

    def channels_of(self, user: str, channels: Iterable[str]) -> frozenset[str]:
        return frozenset(c for c in sorted(channels) if user in self.channel_members(c))

    def forget(self) -> None:
        with self._lock:
            self._members.clear()
