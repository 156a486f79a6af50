"""Pure Block Kit builders for kbbot's replies other than answers: the `/kb list` listing.

Callers hand over plain data (`KbEntry`, `DocEntry`); everything in it is content (KB names,
descriptions, document names, error texts, notes) and is rendered inert (`render.escape`; links
only from `render.safe_url`). The result stays within Slack's limits at any number and length of
KBs and documents: at most 50 blocks, every text object at most 3000 characters, per-KB document
lines capped, the rest summarised as "…and N more".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from slack_sdk.models.blocks import ContextBlock, MarkdownTextObject, SectionBlock

from bot.slack.render import (
    MAX_BLOCKS,
    SECTION_LIMIT,
    TEXT_LIMIT,
    clamp,
    escape,
    mrkdwn_link,
    safe_url,
    shorten,
)

STATE_MARK = {"ready": ":white_check_mark:", "processing": ":hourglass_flowing_sand:", "failed": ":x:"}
DOCS_SHOWN = 15  # document lines per KB
MAX_KBS = (MAX_BLOCKS - 2) // 2  # two blocks per KB, plus the heading and an "…and N more" line
HEADING_CHARS = 150
NAME_CHARS = 120
DESCRIPTION_CHARS = 200
NOTE_CHARS = 300
DOC_NAME_CHARS = 100
DETAIL_CHARS = 80
CHANNELS_SHOWN = 10
_CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,20}$")


@dataclass(frozen=True)
class DocEntry:
    name: str
    state: str  # "ready" | "processing" | "failed" | ...
    chunks: int
    error: str | None
    source_url: str | None


@dataclass(frozen=True)
class KbEntry:
    name: str
    description: str
    restricted: bool
    may_upload: bool
    documents: int
    ready_documents: int
    chunks: int
    docs: Sequence[DocEntry]
    note: str | None = None  # e.g. "declaration broken: … (last known access rules kept)", shown in italics
    channels: Sequence[str] = ()  # the channels that search it first


def _section(text: str) -> dict:
    return SectionBlock(text=MarkdownTextObject(text=clamp(text, SECTION_LIMIT) or "…")).to_dict()


def _context(text: str) -> dict:
    return ContextBlock(elements=[MarkdownTextObject(text=clamp(text, TEXT_LIMIT) or "…")]).to_dict()


def _count(n: object) -> int:
    return n if isinstance(n, int) and n >= 0 else 0


def channel_mention(channel: str) -> str:
    """`<#C…>` for a real channel id (Slack shows its name; it notifies nobody), else inert text."""
    return f"<#{channel}>" if _CHANNEL_ID.match(channel) else escape(shorten(channel, 30))


def kb_head(kb: KbEntry) -> str:
    flags = " · :lock: restricted" if kb.restricted else ""
    flags += " · you can upload" if kb.may_upload else ""
    name = escape(shorten(kb.name, NAME_CHARS)) or "(unnamed)"
    head = (
        f"*{name}* — {_count(kb.ready_documents)}/{_count(kb.documents)} documents ready, "
        f"{_count(kb.chunks)} chunks{flags}"
    )
    if description := shorten(kb.description or "", DESCRIPTION_CHARS):
        head += f"\n{escape(description)}"
    if kb.channels:
        shown = [channel_mention(c) for c in list(kb.channels)[:CHANNELS_SHOWN]]
        more = f" and {len(kb.channels) - CHANNELS_SHOWN} more" if len(kb.channels) > CHANNELS_SHOWN else ""
        head += f"\nSearched first in {', '.join(shown)}{more}"
    if note := shorten(kb.note or "", NOTE_CHARS):
        head += f"\n_{escape(note)}_"
    return head


def doc_line(doc: DocEntry) -> str:
    name = shorten(doc.name, DOC_NAME_CHARS) or "(unnamed)"
    url = safe_url(doc.source_url)
    title = mrkdwn_link(url, name) if url else escape(name)
    if doc.state == "ready":
        detail = f"{_count(doc.chunks)} chunks"
    else:
        detail = escape(shorten(doc.error or doc.state or "unknown", DETAIL_CHARS))
    return f"{STATE_MARK.get(doc.state, '•')} {title} ({detail})"


def doc_lines(kb: KbEntry) -> str:
    """A KB's first documents, one line each, within one text object; "…and N more" for the rest."""
    total = max(len(kb.docs), _count(kb.documents))
    lines: list[str] = []
    size = 0
    for doc in list(kb.docs[:DOCS_SHOWN]):
        line = doc_line(doc)
        if size + len(line) + 1 > TEXT_LIMIT - 40:  # room for the "…and N more" line
            break
        lines.append(line)
        size += len(line) + 1
    if total > len(lines):
        lines.append(f"…and {total - len(lines)} more")
    return "\n".join(lines)


def kb_list_blocks(entries: Sequence[KbEntry], heading: str = "Knowledge bases you can use here") -> list[dict]:
    """The `/kb list` reply: a heading, then per KB a section (name, counts, flags, description, note)
    and a context block of its documents; at most `MAX_KBS` KBs, then "…and N more knowledge bases"."""
    blocks = [_section(f"*{escape(shorten(heading, HEADING_CHARS)) or 'Knowledge bases'}*")]
    for kb in list(entries[:MAX_KBS]):
        blocks.append(_section(kb_head(kb)))
        if kb.docs or _count(kb.documents):
            blocks.append(_context(doc_lines(kb)))
    if not entries:
        blocks.append(_section("No knowledge bases are available here."))
    elif len(entries) > MAX_KBS:
        more = len(entries) - MAX_KBS
        blocks.append(_context(f"…and {more} more knowledge bases" if more != 1 else "…and 1 more knowledge base"))
    return blocks[:MAX_BLOCKS]
