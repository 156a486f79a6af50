"""Block Kit for `/kb list` (placeholder: replaced by the limit-proof builder on the render branch)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from slack_sdk.models.blocks import ContextBlock, MarkdownTextObject, SectionBlock

from bot.slack.render import escape, shorten

STATE_MARK = {"ready": ":white_check_mark:", "processing": ":hourglass_flowing_sand:", "failed": ":x:"}
DOCS_SHOWN = 15


@dataclass(frozen=True)
class DocEntry:
    name: str
    state: str
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
    docs: Sequence[DocEntry] = field(default_factory=tuple)
    note: str | None = None


def kb_list_blocks(entries: Sequence[KbEntry], heading: str = "Knowledge bases you can use here") -> list[dict]:
    blocks = [SectionBlock(text=MarkdownTextObject(text=f"*{heading}*")).to_dict()]
    for entry in entries:
        flags = " · :lock: restricted" if entry.restricted else ""
        head = (
            f"*{escape(entry.name)}* — {entry.ready_documents}/{entry.documents} documents ready, "
            f"{entry.chunks} chunks{flags}{' · you can upload' if entry.may_upload else ''}\n"
            f"{escape(shorten(entry.description, 200))}"
        )
        if entry.note:
            head += f"\n_{escape(shorten(entry.note, 300))}_"
        blocks.append(SectionBlock(text=MarkdownTextObject(text=head)).to_dict())
        if entry.docs:
            lines = []
            for doc in list(entry.docs)[:DOCS_SHOWN]:
                name = escape(shorten(doc.name, 80))
                detail = f"{doc.chunks} chunks" if doc.state == "ready" else escape(shorten(doc.error or doc.state, 80))
                lines.append(f"{STATE_MARK.get(doc.state, '•')} {name} ({detail})")
            if len(entry.docs) > DOCS_SHOWN:
                lines.append(f"…and {len(entry.docs) - DOCS_SHOWN} more")
            blocks.append(ContextBlock(elements=[MarkdownTextObject(text="\n".join(lines))]).to_dict())
    if len(blocks) == 1:
        blocks.append(SectionBlock(text=MarkdownTextObject(text="No knowledge bases are available here.")).to_dict())
    return blocks[:50]
