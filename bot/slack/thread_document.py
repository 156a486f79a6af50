"""A Slack thread → one markdown document for a knowledge base ("Save to a knowledge base").

The document is named after the thread (channel + thread ts), never its title, so saving the same thread
again replaces its previous version. Each message keeps its speaker (a name from `users.info` for the
first few people, else the user id), its date and its text as plain text; kbbot's own replies are left out
(they were drawn from the knowledge bases already, and a KB citing itself proves nothing). The thread's
permalink is the document's source link, so citations of it lead back to the conversation.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from slack_sdk import WebClient

from bot.slack.markup import clean_text
from bot.slack.render import sanitize

log = logging.getLogger(__name__)

MAX_NAME_LOOKUPS = 20  # users.info calls per save; later speakers keep their user id
NAME_CHARS = 80
_ID_CHARS = re.compile(r"[^A-Za-z0-9]")


@dataclass(frozen=True)
class ThreadMessage:
    speaker: str
    at: datetime
    text: str


def document_name(channel: str, thread_ts: str) -> str:
    """Stable for a thread: a re-save replaces the document of that name."""
    return f"slack-thread-{_ID_CHARS.sub('', channel)}-{_ID_CHARS.sub('-', thread_ts)}.md"


def _seconds(ts: object) -> float:
    try:
        return float(str(ts))
    except (TypeError, ValueError):
        return 0.0


def _when(ts: object) -> datetime:
    try:
        return datetime.fromtimestamp(_seconds(ts), tz=UTC)
    except (OverflowError, OSError, ValueError):
        return datetime.fromtimestamp(0, tz=UTC)


def _text_of(message: dict) -> str:
    text = clean_text(message.get("text"))
    files = [f.get("name") or f.get("title") for f in message.get("files") or [] if isinstance(f, dict)]
    if files:
        text = f"{text} (shared {', '.join(str(name) for name in files if name)})".strip()
    return text


def is_kept(message: dict, own_bot_id: str | None, own_user_id: str | None) -> bool:
    """People's messages (and other apps' posts); not kbbot's own replies, not joins and other system events."""
    if own_bot_id and message.get("bot_id") == own_bot_id or own_user_id and message.get("user") == own_user_id:
        return False
    return message.get("subtype") in (None, "thread_broadcast", "file_share", "bot_message")


def speaker_names(client: WebClient, user_ids: list[str], limit: int = MAX_NAME_LOOKUPS) -> dict[str, str]:
    """users.info for the first `limit` distinct people (each once); a lookup that fails keeps the id."""
    names: dict[str, str] = {}
    for user in list(dict.fromkeys(user_ids))[:limit]:
        try:
            info = client.users_info(user=user).get("user") or {}
        except Exception as exc:  # users:read missing, a deleted user, the network: the id will do
            log.debug("users.info %s failed: %s", user, exc)
            continue
        profile = info.get("profile") or {}
        name = profile.get("display_name") or profile.get("real_name") or info.get("real_name") or info.get("name")
        if name:
            names[user] = " ".join(sanitize(name).split())[:NAME_CHARS]
    return names


def thread_messages(
    replies: list[dict], name_of: Callable[[str], str], own_bot_id: str | None, own_user_id: str | None
) -> list[ThreadMessage]:
    kept = []
    for message in sorted(replies, key=lambda m: _seconds(m.get("ts"))):
        if not is_kept(message, own_bot_id, own_user_id):
            continue
        text = _text_of(message)
        if not text:
            continue
        user = message.get("user")
        speaker = name_of(user) if user else (message.get("username") or message.get("bot_id") or "someone")
        kept.append(ThreadMessage(str(speaker), _when(message.get("ts")), text))
    return kept


def render_document(title: str, channel: str, messages: list[ThreadMessage], permalink: str | None) -> bytes:
    """Markdown: the title, where it came from, then one paragraph per message (speaker, date, text). The
    permalink is also the document's source link (what citations show); here it is for readers of the text."""
    title = " ".join(sanitize(title).split()) or "Slack thread"
    started = messages[0].at.strftime("%Y-%m-%d") if messages else "unknown date"
    lines = [f"# {title}", "", f"A Slack conversation in channel {channel}, started {started}."]
    if permalink:
        lines.append(f"Source: {permalink}")
    for message in messages:
        when = message.at.strftime("%Y-%m-%d %H:%M UTC")
        lines += ["", f"**{message.speaker}** ({when}): {sanitize(message.text)}"]
    return ("\n".join(lines) + "\n").encode()
