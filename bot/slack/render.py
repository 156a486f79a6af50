"""Answer → Slack: Block Kit for chat.postMessage, markdown + footer blocks for streaming.

One `Answer` comes back from the engine; this module only decides how it looks in Slack:
the answer text with its [n] markers (linked to the Slack file when the document was uploaded
from Slack), a Sources section, a context line (KB, rounds, offline/LLM) and feedback buttons.
An insufficient-context reply is visibly different: a "not in the knowledge bases" heading,
what was searched, no Sources.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from slack_sdk.models.blocks import (
    ContextActionsBlock,
    ContextBlock,
    DividerBlock,
    FeedbackButtonObject,
    FeedbackButtonsElement,
    MarkdownTextObject,
    SectionBlock,
)

from bot.core import Answer, Citation

FEEDBACK_ACTION_ID = "kb_feedback"
SECTION_LIMIT = 2900  # Slack's limit for a section's text is 3000 characters
MAX_SOURCES = 8
EXCERPT_CHARS = 160
NOT_FOUND_HEADING = ":mag: *The knowledge bases don't have enough to answer this.*"

_MARKER = re.compile(r"\[(\d{1,3})\]")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_MD_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+)$", re.M)


@dataclass
class RenderedAnswer:
    text: str  # plain fallback: notifications, and what the next turn's history reads
    markdown: str  # the body for chat streaming (standard markdown)
    blocks: list[dict] = field(default_factory=list)  # the whole message, for chat.postMessage
    footer_blocks: list[dict] = field(default_factory=list)  # sources/context/feedback, for chat.stopStream


def escape(text: str) -> str:
    """Slack mrkdwn control characters (https://docs.slack.dev/messaging/formatting-message-text)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut + "…"


def _citation_map(citations: Sequence[Citation]) -> dict[int, Citation]:
    return {c.n: c for c in citations}


def to_mrkdwn(text: str, citations: Sequence[Citation] = ()) -> str:
    """The engine's answer text (markdown-ish, with [n] markers) as Slack mrkdwn."""
    by_n = _citation_map(citations)
    links: list[str] = []

    def keep_link(match: re.Match) -> str:
        links.append(f"<{match.group(2)}|{escape(match.group(1))}>")
        return f"\x00{len(links) - 1}\x00"

    text = _MD_LINK.sub(keep_link, text)
    text = escape(text)
    text = _HEADING.sub(lambda m: f"*{m.group(1).strip()}*", text)
    text = _BOLD.sub(lambda m: f"*{m.group(1)}*", text)

    def marker(match: re.Match) -> str:
        citation = by_n.get(int(match.group(1)))
        if citation is not None and citation.source_url:
            return f"<{citation.source_url}|[{match.group(1)}]>"
        return match.group(0)

    text = _MARKER.sub(marker, text)
    return re.sub(r"\x00(\d+)\x00", lambda m: links[int(m.group(1))], text)


_SLACK_CONTROL = re.compile(r"<(?=[!@#])")


def defuse(text: str) -> str:
    """Document text must not ping anyone: `<!channel>`, `<@U…>`, `<#C…>` are broken with a zero-width space."""
    return _SLACK_CONTROL.sub("<\u200b", text)


def to_markdown(text: str, citations: Sequence[Citation] = ()) -> str:
    """The answer text for chat streaming (markdown): [n] markers link to Slack files when known."""
    by_n = _citation_map(citations)
    text = defuse(text)

    def marker(match: re.Match) -> str:
        citation = by_n.get(int(match.group(1)))
        if citation is not None and citation.source_url:
            return f"[\\[{match.group(1)}\\]]({citation.source_url})"
        return match.group(0)

    return _MARKER.sub(marker, text)


def split_text(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Split long text on paragraph/line boundaries so each piece fits one section block."""
    pieces: list[str] = []
    while len(text) > limit:
        cut = max(text.rfind("\n\n", 0, limit), text.rfind("\n", 0, limit), text.rfind(" ", 0, limit))
        cut = cut if cut > limit // 2 else limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return pieces or [""]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def answer_kbs(answer: Answer) -> list[str]:
    """The KBs the answer drew from (cited), else those it searched."""
    cited = list(dict.fromkeys(c.kb for c in answer.citations))
    return cited or list(answer.searched_kbs) or list(answer.route.kbs)


def context_line(answer: Answer) -> str:
    mode = "LLM" if answer.mode == "llm" else "offline"
    rounds = _plural(max(len(answer.rounds), 1), "round")
    if answer.answered:
        kbs = ", ".join(answer_kbs(answer)) or "no KB"
        line = f":books: {escape(kbs)} · {rounds} · {mode}"
    else:
        searched = ", ".join(answer.searched_kbs or answer.route.kbs) or "no knowledge base available here"
        line = f":mag_right: Searched {escape(searched)} · {rounds} · {mode}"
    total = answer.timings_ms.get("total") if answer.timings_ms else None
    if isinstance(total, (int, float)) and total > 0:
        line += f" · {total / 1000:.1f} s"
    return line


def short_location(location: str) -> str:
    """'Doc title > Section > Subsection' → 'Section › Subsection' (the document is named already)."""
    parts = [p.strip() for p in location.split(" > ") if p.strip()]
    return shorten(" › ".join(parts[-2:]) if len(parts) > 2 else " › ".join(parts), 80)


def source_line(citation: Citation) -> str:
    document = escape(citation.document)
    title = f"<{citation.source_url}|{document}>" if citation.source_url else f"*{document}*"
    parts = [f"*[{citation.n}]* {title}"]
    if citation.location:
        parts.append(escape(short_location(citation.location)))
    if citation.kb:
        parts.append(f"_{escape(citation.kb)}_")
    line = " · ".join(parts)
    excerpt = shorten(citation.excerpt or "", EXCERPT_CHARS)
    if excerpt:
        line += f"\n“{escape(excerpt)}”"
    return line


def sources_blocks(citations: Sequence[Citation]) -> list[dict]:
    if not citations:
        return []
    blocks = [SectionBlock(text=MarkdownTextObject(text="*Sources*")).to_dict()]
    for citation in list(citations)[:MAX_SOURCES]:
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=source_line(citation))]).to_dict())
    if len(citations) > MAX_SOURCES:
        more = len(citations) - MAX_SOURCES
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=f"…and {more} more")]).to_dict())
    return blocks


def feedback_block(answer_id: str) -> dict:
    return ContextActionsBlock(
        block_id=f"feedback-{answer_id}",
        elements=[
            FeedbackButtonsElement(
                action_id=FEEDBACK_ACTION_ID,
                positive_button=FeedbackButtonObject(
                    text="Helpful", accessibility_label="This answer was helpful", value=f"good:{answer_id}"
                ),
                negative_button=FeedbackButtonObject(
                    text="Not helpful", accessibility_label="This answer was not helpful", value=f"bad:{answer_id}"
                ),
            )
        ],
    ).to_dict()


def _notes(answer: Answer) -> list[str]:
    return [escape(shorten(n, 200)) for n in answer.notes if n][:3]


def render_answer(answer: Answer, answer_id: str | None = None, *, feedback: bool = True) -> RenderedAnswer:
    footer: list[dict] = []
    if answer.answered:
        body_mrkdwn = to_mrkdwn(answer.answer, answer.citations)
        head: list[dict] = [
            SectionBlock(text=MarkdownTextObject(text=piece)).to_dict() for piece in split_text(body_mrkdwn)
        ]
        markdown = to_markdown(answer.answer, answer.citations)
        text = answer.answer
        footer += sources_blocks(answer.citations)
    else:
        body = to_mrkdwn(answer.answer) if answer.answer else ""
        head = [SectionBlock(text=MarkdownTextObject(text=NOT_FOUND_HEADING)).to_dict()]
        head += [SectionBlock(text=MarkdownTextObject(text=p)).to_dict() for p in split_text(body) if p]
        markdown = "🔎 **The knowledge bases don't have enough to answer this.**"
        markdown += f"\n\n{defuse(answer.answer)}" if answer.answer else ""
        text = "The knowledge bases don't have enough to answer this." + (f" {answer.answer}" if answer.answer else "")
    context = [MarkdownTextObject(text=context_line(answer))]
    context += [MarkdownTextObject(text=f"_{note}_") for note in _notes(answer)]
    footer.append(ContextBlock(elements=context).to_dict())
    if feedback and answer_id:
        footer.append(feedback_block(answer_id))
    blocks = head + ([DividerBlock().to_dict()] if answer.answered and answer.citations else []) + footer
    return RenderedAnswer(text=text, markdown=markdown, blocks=blocks[:50], footer_blocks=footer[:49])


def render_error(message: str) -> RenderedAnswer:
    text = f":warning: {message}"
    return RenderedAnswer(text=text, markdown=text, blocks=[SectionBlock(text=MarkdownTextObject(text=text)).to_dict()])
