"""Which knowledge bases a question may use, decided by where it was asked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tools.manifests import KnowledgeBaseManifest


@dataclass(frozen=True)
class Scope:
    """Where a question comes from. `channel=None` is a trusted local surface (CLI, eval)."""

    channel: str | None = None
    # For DMs: the channels the asking user belongs to; restricted KBs follow them there.
    member_of: frozenset[str] | None = None
    is_dm: bool = False


def allowed_kbs(manifests: Mapping[str, KnowledgeBaseManifest], scope: Scope) -> list[str]:
    """KBs that may be searched and cited here: public ones, and restricted ones only in their channels
    (or in a DM of someone who is a member of one of them)."""
    allowed = []
    for name, manifest in sorted(manifests.items()):
        if not manifest.restricted:
            allowed.append(name)
        elif scope.is_dm:  # before the trusted-surface case: a DM is a DM even without a channel id
            if scope.member_of and scope.member_of & set(manifest.allowed_channels):
                allowed.append(name)
        elif scope.channel is None or manifest.visible_in(scope.channel):
            allowed.append(name)
    return allowed


def channel_default_kbs(manifests: Mapping[str, KnowledgeBaseManifest], channel: str | None, among: Iterable[str]) -> list[str]:
    """KBs whose manifest names this channel as a default: routing looks there first."""
    if channel is None:
        return []
    among = set(among)
    return [name for name, m in sorted(manifests.items()) if channel in m.channels and name in among]
