"""`/kb channel [add|remove <kb> | autoreply on|off]`: a channel's setup, from inside it.

The application layer decides and stores everything (`KnowledgeBot.channel_view`, `set_searched_first`,
`set_autoreply`); this module parses the command and words the replies. Access rules (restricted KBs and
their allowed channels) are not set here: they live in each KB's kb.toml.
"""

from __future__ import annotations

import logging

from slack_bolt import Respond

from bot.core import AccessDenied, ChannelView, KnowledgeBaseError, NotAllowedHere, NotFound, Origin, Surface
from bot.slack import builders
from bot.slack.blocks import channel_mention
from bot.slack.deps import SlackDeps
from bot.slack.render import clamp, escape, shorten

log = logging.getLogger(__name__)

USAGE = (
    "Usage: `/kb channel` (what this channel searches first) · `/kb channel add <kb>` · "
    "`/kb channel remove <kb>` (that KB's uploaders or admins) · `/kb channel autoreply on|off` (admins)"
)
IN_A_CHANNEL = ":information_source: Run `/kb channel` in the channel you want to set up."
NOT_SAVED = ":warning: Sorry — I couldn't change that right now. Please try again in a minute."
NOT_ADMIN = ":no_entry: Only kbbot's admins (`KBBOT_ADMIN_USERS`) can turn auto-reply on or off."
channel_ref = channel_mention


def kb_ref(kb: str) -> str:
    return f"`{escape(shorten(kb, 80))}`"


def view_text(view: ChannelView) -> str:
    if view.searched_first:
        parts = []
        for kb in view.searched_first:
            why = "its kb.toml" if kb.declared else "added"
            if not kb.declared and kb.added_by:
                why += f" by {builders.uploaders_text([kb.added_by])}"
            parts.append(f"{kb_ref(kb.name)} ({why})")
        lines = [f"*{channel_ref(view.channel)} searches first:* {', '.join(parts)}"]
    else:
        lines = [f"*{channel_ref(view.channel)} searches no knowledge base first*: every question is routed."]
    if view.also_readable:
        lines.append(f"Also searched here when a question fits: {', '.join(kb_ref(k) for k in view.also_readable)}")
    if view.autoreply:
        lines.append(
            "Auto-reply is *on*: I answer top-level questions here without a mention when the knowledge bases "
            "have the answer, and stay quiet otherwise."
        )
    else:
        lines.append("Auto-reply is off: I answer here when @mentioned.")
    lines.append(USAGE)
    return clamp("\n".join(lines))


def handle_channel_command(deps: SlackDeps, respond: Respond, origin: Origin, rest: str) -> None:
    """On a worker (after the ack): show or change this channel's setup, replying ephemerally."""
    words = rest.split()
    action = words[0].lower() if words else ""
    if origin.surface != Surface.CHANNEL:
        respond(text=IN_A_CHANNEL, response_type="ephemeral")
        return
    try:
        if not words:
            text = view_text(deps.bot.channel_view(origin))
        elif action in ("add", "remove") and len(words) == 2:
            text = change_kb(deps, origin, words[1], action == "add")
        elif action == "autoreply" and len(words) == 2 and words[1].lower() in ("on", "off"):
            text = change_autoreply(deps, origin, words[1].lower() == "on")
        else:
            text = USAGE
    except KnowledgeBaseError as exc:
        log.error("/kb channel in %s failed: %s", origin.channel, exc)
        text = NOT_SAVED
    except Exception:
        log.exception("/kb channel in %s failed", origin.channel)
        text = NOT_SAVED
    respond(text=text, response_type="ephemeral")


def change_kb(deps: SlackDeps, origin: Origin, kb: str, add: bool) -> str:
    here = channel_ref(origin.channel or "")
    try:
        changed = deps.bot.set_searched_first(origin, kb, add)
    except NotFound:
        return f":x: {builders.no_such_kb(kb)}"
    except NotAllowedHere:
        return (
            f":no_entry: {kb_ref(kb)} is restricted to its allowed channels (set in its kb.toml), "
            f"so {here} cannot search it."
        )
    except AccessDenied as exc:
        return (
            f":no_entry: Only the uploaders of {kb_ref(kb)} (or an admin) can change where it is searched first: "
            f"{builders.uploaders_text(exc.uploaders)}."
        )
    if add:
        return (
            f":white_check_mark: {here} now searches {kb_ref(kb)} first."
            if changed
            else f"{here} already searches {kb_ref(kb)} first."
        )
    return (
        f":white_check_mark: {here} no longer searches {kb_ref(kb)} first (it is still searched when a question fits)."
        if changed
        else f"{here} didn't search {kb_ref(kb)} first."
    )


def change_autoreply(deps: SlackDeps, origin: Origin, on: bool) -> str:
    try:
        deps.bot.set_autoreply(origin, on)
    except AccessDenied:
        return NOT_ADMIN
    here = channel_ref(origin.channel or "")
    if on:
        return (
            f":white_check_mark: Auto-reply is on in {here}: I'll answer top-level questions without a mention "
            "when the knowledge bases have the answer (in the message's thread), and stay quiet otherwise. "
            "I only see messages in channels I'm a member of (`/invite @kbbot`)."
        )
    return f":white_check_mark: Auto-reply is off in {here}: I answer here when @mentioned."
