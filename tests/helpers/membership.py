"""A stand-in for Slack's conversations.members where no Slack is involved (the application layer's tests)."""

from __future__ import annotations

from collections.abc import Iterable


class StaticMembership:
    """Slack's conversations.members as a table: the boundary the application layer asks."""

    def __init__(self, members: dict[str, set[str]] | None = None, fail: bool = False):
        self.members = members or {}
        self.fail = fail
        self.asked: list[tuple[str, frozenset[str]]] = []

    def channels_of(self, user: str, channels: Iterable[str]) -> frozenset[str]:
        channels = frozenset(channels)
        self.asked.append((user, channels))
        if self.fail:
            raise RuntimeError("conversations.members failed")
        return frozenset(c for c in channels if user in self.members.get(c, set()))
