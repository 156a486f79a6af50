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


def searched_first(origin: Origin, entries: Mapping[str, KbEntry]) -> list[str]:
    """The KBs whose manifest names the channel the question comes from (or, in the assistant pane, the
    channel the user is looking at): routing searches them first. The caller keeps only those the origin may
    read, so a channel in view changes the order, never the scope."""
    channel = origin.context_channel if origin.surface == origin.surface.ASSISTANT else origin.channel
    if channel is None:
        return []
    return [name for name, e in sorted(entries.items()) if e.manifest and channel in e.manifest.channels]
