"""Slack users' display names (`users.info`), for "uploaded by" in Sources.

A name, not a mention: a mention in an answer would notify the uploader every time their document is
cited. Names are kept for an hour; a failed lookup is not kept and the source says "uploaded from Slack".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from slack_sdk import WebClient

log = logging.getLogger(__name__)

NAME_TTL_S = 3600.0
MAX_LOOKUPS = 8  # per answer (its cited documents' uploaders): a long list never delays a reply much


class SlackPeople:
    def __init__(self, client: WebClient, ttl_s: float = NAME_TTL_S):
        self.client = client
        self.ttl_s = ttl_s
        self._names: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def name_of(self, user: str) -> str | None:
        now = time.monotonic()
        with self._lock:
            cached = self._names.get(user)
        if cached and now - cached[0] < self.ttl_s:
            return cached[1]
        try:
            profile = (self.client.users_info(user=user).get("user") or {}).get("profile") or {}
        except Exception as exc:  # Slack refused (no users:read scope, deleted user) or the network failed
            log.info("users.info %s failed: %s", user, getattr(exc, "response", {}).get("error", type(exc).__name__))
            return None
        name = str(profile.get("display_name") or profile.get("real_name") or "").strip()
        if not name:
            return None
        with self._lock:
            self._names[user] = (now, name)
        return name

    def names_of(self, users: Iterable[str]) -> dict[str, str]:
        names = {}
        for user in list(dict.fromkeys(u for u in users if u))[:MAX_LOOKUPS]:
            if name := self.name_of(user):
                names[user] = name
        return names

    def forget(self) -> None:
        with self._lock:
            self._names.clear()
