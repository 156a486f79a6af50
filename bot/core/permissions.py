"""Who may read, upload to and delete from which knowledge base: every such decision is made here.

The rules a KB is judged by are its last known manifest, stored in the registry (`KbEntry.manifest`),
never a file read on the spot. Everything fails closed:
- a KB with no known rules is usable from the command line only;
- a restricted KB is readable only in its `allowed_channels`, and in a DM (or the assistant pane) only by a
  member of one of them; when membership cannot be looked up, nobody gets it there;
- uploads and deletes: the KB's `uploaders` and the admins (KBBOT_ADMIN_USERS), and the command line;
- how an answer was found (its trace): only for someone who may read, where they are, every KB it names;
  and the trace of an answer given in a DM (or the assistant pane) only to the person it was given to.
- knowledge gaps (refused questions, 👎 answers) of a KB: those who may both read and change it; a gap
  that also concerns another KB is shown only to someone who may read every KB it concerns.
- which KBs a channel searches first (`/kb channel add|remove`): that KB's uploaders and the admins, and only
  where the KB may be read; auto-reply in a channel: the admins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from bot.core.origin import Origin
from tools.service import KbEntry


class MembershipLookup(Protocol):
    def channels_of(self, user: str, channels: Iterable[str]) -> frozenset[str]:
        """Which of `channels` the user belongs to. Raises when it cannot tell (the caller fails closed)."""
        ...


def restricted_channels(entries: Mapping[str, KbEntry]) -> set[str]:
    """The channels whose members may read some restricted KB in a DM."""
    return {c for e in entries.values() if e.manifest and e.manifest.restricted for c in e.manifest.allowed_channels}


def may_read(origin: Origin, entry: KbEntry, member_of: frozenset[str] = frozenset()) -> bool:
    """May this KB be searched and cited for this origin (and shown to it in lists)?"""
    if origin.kbs is not None and entry.name not in origin.kbs:
        return False
    if origin.trusted:
        return True
    manifest = entry.manifest
    if manifest is None:
        return False
    if not manifest.restricted:
        return True
    allowed = set(manifest.allowed_channels)
    if origin.private:
        # A DM is a DM, whatever its channel id says; in the assistant pane the channel the user is looking at
        # (`context_channel`) grants nothing either: only the user's own memberships open a restricted KB.
        return bool(member_of & allowed)
    return origin.channel in allowed


def may_see_trace(
    origin: Origin,
    asked_in: Origin,
    kbs: Iterable[str],
    entries: Mapping[str, KbEntry],
    member_of: frozenset[str] = frozenset(),
) -> bool:
    """May this origin see how an answer (given at `asked_in`) was found, a trace naming `kbs`? A KB with no
    known rules now (deleted, never declared) cannot be judged, so a trace naming one is refused."""
    if origin.trusted:
        return True
    if asked_in.private and (not origin.user or origin.user != asked_in.user):
        return False
    return all(kb in entries and may_read(origin, entries[kb], member_of) for kb in kbs)


def is_admin(origin: Origin, admins: frozenset[str]) -> bool:
    return bool(origin.user) and origin.user in admins


def may_change(origin: Origin, entry: KbEntry, admins: frozenset[str]) -> bool:
    """May this origin upload documents to this KB and delete them from it?"""
    if origin.trusted:
        return True
    if entry.manifest is None:  # no known rules: the command line only, admins included
        return False
    return is_admin(origin, admins) or (bool(origin.user) and origin.user in entry.manifest.uploaders)


def may_see_gaps(
    origin: Origin, entry: KbEntry, admins: frozenset[str], member_of: frozenset[str] = frozenset()
) -> bool:
    """May this origin see the questions this KB failed (its uploaders and admins, where they may read it)?"""
    return may_read(origin, entry, member_of) and may_change(origin, entry, admins)


def may_see_gap_of(scope: Iterable[str], readable: Iterable[str]) -> bool:
    """A refused or 👎 question concerns every KB in `scope`: its text is shown only to someone who may read
    them all (a question asked where a restricted KB was searched stays with that KB's readers)."""
    kbs = set(scope)
    return bool(kbs) and kbs <= set(readable)


def search_channel(origin: Origin) -> str | None:
    """The channel whose searched-first KBs apply: where the question comes from, or in the assistant pane the
    channel the user is looking at."""
    return origin.context_channel if origin.surface == origin.surface.ASSISTANT else origin.channel


def searched_first(
    origin: Origin, entries: Mapping[str, KbEntry], changed_here: Mapping[str, bool] | None = None
) -> list[str]:
    """The KBs routing searches first for a question from this channel (or, in the assistant pane, the channel
    the user is looking at): those whose kb.toml names the channel, as changed there from Slack
    (`changed_here`: KB → searched first or not; a KB with no change follows its kb.toml). It says nothing
    about access: the caller keeps only the KBs the origin may read."""
    channel = search_channel(origin)
    if channel is None:
        return []
    changed_here = changed_here or {}
    return [
        name
        for name, e in sorted(entries.items())
        if changed_here.get(name, bool(e.manifest and channel in e.manifest.channels))
    ]


def first_channels(entry: KbEntry, changes: Mapping[str, bool] | None = None) -> tuple[str, ...]:
    """The channels that search this KB first: its kb.toml `channels`, as changed from Slack (`changes`:
    channel → searched first or not)."""
    changes = changes or {}
    declared = entry.manifest.channels if entry.manifest else ()
    kept = [c for c in declared if changes.get(c, True)]
    added = sorted(c for c, first in changes.items() if first and c not in declared)
    return (*kept, *added)


def may_be_searched_in(channel: str, entry: KbEntry) -> bool:
    """May this KB be put first in a channel's search (it must be readable there: restricted KBs only in their
    allowed channels — the rules stay in kb.toml)."""
    return may_read(Origin.slack_channel(channel, None), entry)


def may_set_up_channels(origin: Origin, admins: frozenset[str]) -> bool:
    """May this origin turn a channel's auto-reply on or off (kbbot's admins only)?"""
    return is_admin(origin, admins)
