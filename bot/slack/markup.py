"""Slack message markup → the plain text the application layer works with (the one cleaner kbbot has).

Mentions of people carry no meaning for a search (and a user id reads like an identifier the documents
should name), so they are dropped unless Slack sent a label; channel references keep their name, links
their label (or the URL), special mentions disappear, entities are decoded.
"""

from __future__ import annotations

import html
import re

_USER_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^>]*))?>")
_SPECIAL_MENTION = re.compile(r"<!(?:here|channel|everyone)(?:\|[^>]*)?>|<!subteam\^[A-Z0-9]+(?:\|([^>]*))?>")
_CHANNEL = re.compile(r"<#([CG][A-Z0-9]+)(?:\|([^>]*))?>")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")


def clean_text(text: str | None) -> str:
    text = _USER_MENTION.sub(lambda m: f"@{m.group(2)}" if m.group(2) else " ", text or "")
    text = _SPECIAL_MENTION.sub(lambda m: m.group(1) or " ", text)
    text = _CHANNEL.sub(lambda m: f"#{m.group(2) or m.group(1)}", text)  # <#C123> may come without a label
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    return " ".join(html.unescape(text).split())


def mentions(text: str | None, user_id: str | None) -> bool:
    """Whether the message @mentions this user (the bot)."""
    return bool(user_id) and any(m.group(1) == user_id for m in _USER_MENTION.finditer(text or ""))
