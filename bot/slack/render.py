"""Answer → Slack: Block Kit for chat.postMessage, markdown + footer blocks for streaming.

One `Answer` comes back from the engine; this module only decides how it looks in Slack:
the answer text with its [n] markers (linked to the Slack file when the document was uploaded
from Slack), a Sources section (each source with when its document was last updated, who uploaded
it from Slack, and a mark when it may be outdated), a context line (KB, rounds, offline/LLM), a
"How I found this" button and feedback buttons. An insufficient-context reply is visibly different:
a "not in the knowledge bases" heading, what was searched, no Sources.

Everything from content (documents, the LLM, users: answer text, document names, locations, KB
names, excerpts, notes) is inert in Slack:

- invisible and bidi control characters are removed (`sanitize`), so text cannot be disguised;
- in mrkdwn (section/context text objects and the message's fallback `text`) `&`, `<`, `>` become
  entities (`escape`), Slack's documented escaping, so no `<!channel>`, `<@U…>`, `<#C…>` or
  `<url|label>` can form; bare `@channel`/`@here`/`@everyone` get a full-width `＠`;
- in standard markdown (chat streaming's `markdown_text`) Slack documents no way to escape `<`
  and does not say how it treats entities or `<…>` there, so no ASCII `<` from content reaches it
  at all (it becomes the full-width `＜`), entity-like `&…;` get a full-width `＆`, and `\\`, `[`, `]`
  are backslash-escaped (the escaping Slack's markdown block documents), so content cannot form a
  markdown link, an image, a reference definition or an autolink;
- a link is rendered only by kbbot, from a URL that passes `safe_url` (http/https, no spaces,
  control characters, `<>|`, entities or user-info), with its label escaped; anything else stays
  plain escaped text. [n] markers link to the cited Slack file when its URL is valid.

And every payload stays within Slack's limits (50 blocks, 3000 characters per text object, 10
context elements, 12,000 characters of markdown_text, a short fallback text): long answers are
split across sections and, past what a message holds, shortened with a visible note.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    ContextActionsBlock,
    ContextBlock,
    DividerBlock,
    FeedbackButtonObject,
    FeedbackButtonsElement,
    MarkdownTextObject,
    SectionBlock,
)

from bot.core import Answer, Citation
from bot.core import shorten as plain_shorten

FEEDBACK_ACTION_ID = "kb_feedback"
TRACE_ACTION_ID = "kb_trace"
TRACE_BUTTON_TEXT = "How I found this"
STALE_MARK = ":warning: possibly outdated"
NOT_FOUND_HEADING = ":mag: *The knowledge bases don't have enough to answer this.*"
NOT_FOUND_TEXT = "The knowledge bases don't have enough to answer this."
SHORTENED_NOTE = "_(answer shortened to fit in Slack)_"

# Slack's limits (docs.slack.dev: Block Kit blocks, text object, context block, chat.postMessage,
# chat.startStream/appendStream/stopStream), with margins.
MAX_BLOCKS = 50  # per message; chat.stopStream's `blocks` too
TEXT_LIMIT = 3000  # any text object: section text, context element (minimum 1)
SECTION_LIMIT = 2900
MAX_CONTEXT_ELEMENTS = 10
MARKDOWN_LIMIT = 11_500  # markdown_text: 12,000 characters per call (kbbot sends the body in one)
FALLBACK_LIMIT = 3000  # the message `text` (Slack: keep it under 4,000; it truncates at 40,000)
MAX_URL_CHARS = 1000  # a rendered link's URL, escaped
LABEL_CHARS = 300
DOCUMENT_CHARS = 150
NAME_CHARS = 80
MAX_SOURCES = 8
EXCERPT_CHARS = 160
NOTE_CHARS = 200
MAX_NOTES = 3

_MARKER = re.compile(r"\[(\d{1,3})\]")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
# A markdown link in content, its target anything without spaces or parentheses: validated later.
_LINK_OR_MARKER = re.compile(r"\[([^\[\]\n]{1,1000})\]\(([^()\s]{1,4000})\)|\[(\d{1,3})\]")

# Characters that change how text looks without being seen: zero-width, bidi embeddings/overrides/
# isolates, BOM, invisible operators, tag characters (ASCII smuggling), soft hyphen, interlinear
# annotation; plus C0/C1 controls other than tab and newline.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000e0000-\U000e007f\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)
_BROADCAST_WORD = re.compile(r"(?<![\w@＠])@(channel|here|everyone)\b", re.I)
# `&` starting an entity (also the legacy `&lt`, `&gt`, `&amp` without `;` that HTML decodes)
_ENTITY_LIKE = re.compile(
    r"&(?=#\d+;?|#[xX][0-9a-fA-F]+;?|[A-Za-z][A-Za-z0-9]{1,31};|(?:lt|gt|amp|quot)(?![a-z]))", re.I
)
_URL = re.compile(r"https?://[A-Za-z0-9\-._~%!$&'()*+,;=:@/?#\[\]]+\Z", re.I)
_ENTITY_IN_URL = re.compile(r"&(#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
# A mrkdwn string's unbreakable pieces: kbbot's own links, entities, whitespace runs, words.
_MRKDWN_ATOM = re.compile(r"<[^<>\n]*>|&(?:amp|lt|gt);|\n\n+|\n|[ \t]+|[^\s<&]+|[\s\S]")
_MARKDOWN_ATOM = re.compile(r"\\[\s\S]|[\s\S]")


@dataclass
class RenderedAnswer:
    text: str  # plain fallback: notifications, and what the next turn's history reads
    markdown: str  # the body for chat streaming (standard markdown)
    blocks: list[dict] = field(default_factory=list)  # the whole message, for chat.postMessage
    footer_blocks: list[dict] = field(default_factory=list)  # sources/context/feedback, for chat.stopStream


# --- making content inert --------------------------------------------------------------------------


def sanitize(text: object) -> str:
    """Content without the characters that disguise text (zero-width, bidi overrides, tag and control
    characters); line and paragraph separators become newlines."""
    text = str(text or "")
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n\n")
    return _INVISIBLE.sub("", text)


def escape(text: object) -> str:
    """Content as inert Slack mrkdwn: sanitized, `&`, `<`, `>` as entities
    (https://docs.slack.dev/messaging/formatting-message-text), bare broadcasts defused."""
    text = sanitize(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCAST_WORD.sub(r"＠\1", text)


def markdown_escape(text: object) -> str:
    """Content as inert standard markdown (chat streaming): no ASCII `<`, no entity, no link syntax."""
    text = sanitize(text).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("<", "＜")
    return _BROADCAST_WORD.sub(r"＠\1", _ENTITY_LIKE.sub("＆", text))


def safe_url(url: object) -> str | None:
    """The URL if kbbot may render it as a link: http(s), a host, no user-info (`https://slack.com@evil`),
    only URL characters (no spaces, control characters, `<>|\\`, quotes), no entities; else None."""
    if not isinstance(url, str) or not url or len(url) + 4 * url.count("&") > MAX_URL_CHARS:
        return None
    if not _URL.match(url) or _ENTITY_IN_URL.search(url):
        return None
    authority = re.split(r"[/?#]", url.split("://", 1)[1], maxsplit=1)[0]
    host = authority.rsplit(":", 1)[0] if not authority.endswith("]") else authority
    if "@" in authority or not host.strip("[]."):
        return None
    return url


def shorten(text: str, limit: int) -> str:
    """Sanitized, on one line, at most `limit` characters."""
    return plain_shorten(sanitize(text), limit)


def mrkdwn_link(url: str, label: str) -> str:
    """`<url|label>` for a URL that passed `safe_url`; the label is content (escaped here)."""
    label = escape(shorten(label, LABEL_CHARS))
    target = url.replace("&", "&amp;")
    return f"<{target}|{label}>" if label else f"<{target}>"


def markdown_link(url: str, label: str) -> str:
    label = markdown_escape(shorten(label, LABEL_CHARS)) or markdown_escape(url)
    return f"[{label}]({url.replace('(', '%28').replace(')', '%29')})"


# --- sizes ---------------------------------------------------------------------------------------


def split_text(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Split mrkdwn on paragraph/line/word boundaries so each piece fits one text object; an entity
    (`&amp;`) or one of kbbot's links (`<url|label>`) is never cut."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0

    def flush(upto: int) -> None:
        nonlocal current, size
        head, tail = current[:upto], current[upto:]
        piece = "".join(head).strip()
        if piece:
            pieces.append(piece)
        while tail and tail[0].isspace():
            tail = tail[1:]
        current, size = tail, sum(len(a) for a in tail)

    for atom in _MRKDWN_ATOM.findall(text):
        chunks = [atom[i : i + limit] for i in range(0, len(atom), limit)] if len(atom) > limit else [atom]
        for chunk in chunks:
            while current and size + len(chunk) > limit:
                flush(_break_at(current, limit))
            if current or not chunk.isspace():
                current.append(chunk)
                size += len(chunk)
    flush(len(current))
    return pieces or [""]


def _break_at(atoms: list[str], limit: int) -> int:
    """Where to break a too-long piece: its last paragraph break, else line break, else space, if that
    keeps at least half of it; else at the end (before the atom that does not fit)."""
    offsets, total = [], 0
    for atom in atoms:
        offsets.append(total)
        total += len(atom)
    for kind in ("\n\n", "\n", " "):
        for i in range(len(atoms) - 1, 0, -1):
            if offsets[i] < limit // 2:
                break
            if atoms[i].isspace() and kind in atoms[i] and (kind != "\n" or "\n\n" not in atoms[i]):
                return i
    return len(atoms)


def clamp(text: str, limit: int = TEXT_LIMIT) -> str:
    """mrkdwn cut (at a safe boundary) to fit `limit` characters, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return split_text(text, limit - 1)[0] + "…"


def _clamp_markdown(parts: list[str], limit: int) -> str:
    """Join markdown parts (links/markers are whole parts, text parts are escaped text) within
    `limit` characters, never cutting a part's link or a backslash escape."""
    out: list[str] = []
    size = 0
    for part in parts:
        if size + len(part) <= limit:
            out.append(part)
            size += len(part)
            continue
        if not part.startswith("["):  # escaped text: cut between its atoms
            for atom in _MARKDOWN_ATOM.findall(part):
                if size + len(atom) > limit - 1:
                    break
                out.append(atom)
                size += len(atom)
        return "".join(out).rstrip() + "…"
    return "".join(out)


# --- answer text ---------------------------------------------------------------------------------


def _citation_map(citations: Sequence[Citation]) -> dict[int, Citation]:
    return {c.n: c for c in citations}


def _tokens(text: str, citations: Sequence[Citation]):
    """The answer text as (kind, value) tokens: ("text", str), ("link", (url, label, raw)),
    ("marker", (n, url or None, raw)). Only URLs that pass `safe_url` make links."""
    by_n = _citation_map(citations)
    position = 0
    for match in _LINK_OR_MARKER.finditer(text):
        if match.start() > position:
            yield "text", text[position : match.start()]
        position = match.end()
        if match.group(3) is not None:
            citation = by_n.get(int(match.group(3)))
            yield "marker", (match.group(3), safe_url(citation.source_url) if citation else None, match.group(0))
        elif (url := safe_url(match.group(2))) is not None:
            yield "link", (url, match.group(1), match.group(0))
        else:
            yield "text", match.group(0)
    if position < len(text):
        yield "text", text[position:]


def to_mrkdwn(text: str, citations: Sequence[Citation] = ()) -> str:
    """The engine's answer text (markdown-ish, with [n] markers) as inert Slack mrkdwn."""
    text = sanitize(text)
    text = _HEADING.sub(lambda m: f"**{m.group(1).strip()}**", text)
    text = _BOLD.sub(lambda m: f"*{m.group(1)}*", text)
    out = []
    for kind, value in _tokens(text, citations):
        if kind == "text":
            out.append(escape(value))
        elif kind == "link":
            out.append(mrkdwn_link(value[0], value[1]))
        else:
            n, url, raw = value
            out.append(f"<{url.replace('&', '&amp;')}|[{n}]>" if url else raw)
    return "".join(out)


def to_markdown(text: str, citations: Sequence[Citation] = (), limit: int = MARKDOWN_LIMIT) -> str:
    """The answer text for chat streaming (standard markdown), inert, at most `limit` characters:
    [n] markers link to Slack files when known."""
    parts = []
    for kind, value in _tokens(sanitize(text), citations):
        if kind == "text":
            parts.append(markdown_escape(value))
        elif kind == "link":
            parts.append(markdown_link(value[0], value[1]))
        else:
            n, url, _ = value
            parts.append(f"[\\[{n}\\]]({url.replace('(', '%28').replace(')', '%29')})" if url else f"\\[{n}\\]")
    return _clamp_markdown(parts, limit)


def to_plain(text: str, limit: int = FALLBACK_LIMIT) -> str:
    """The fallback `text` (notifications, screen readers, what history reads): links reduced to
    their label, escaped, short."""
    out = []
    for kind, value in _tokens(sanitize(text), ()):
        out.append(escape(value) if kind == "text" else escape(value[1] if kind == "link" else value[2]))
    plain = _BOLD.sub(lambda m: f"*{m.group(1)}*", "".join(out)).strip()
    return clamp(plain, limit) if plain else "…"


# --- the message ---------------------------------------------------------------------------------


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def answer_kbs(answer: Answer) -> list[str]:
    """The KBs the answer drew from (cited), else those it searched."""
    cited = list(dict.fromkeys(c.kb for c in answer.citations))
    return cited or list(answer.searched_kbs) or list(answer.route.kbs)


def _kb_names(names: Sequence[str]) -> str:
    return escape(", ".join(shorten(n, NAME_CHARS) for n in names[:10]) + (" …" if len(names) > 10 else ""))


def context_line(answer: Answer) -> str:
    mode = "LLM" if answer.mode == "llm" else "offline"
    rounds = _plural(max(len(answer.rounds), 1), "round")
    if answer.answered:
        kbs = _kb_names(answer_kbs(answer)) or "no KB"
        line = f":books: {kbs} · {rounds} · {mode}"
    else:
        searched = _kb_names(answer.searched_kbs or answer.route.kbs) or "no knowledge base available here"
        line = f":mag_right: Searched {searched} · {rounds} · {mode}"
    total = answer.timings_ms.get("total") if answer.timings_ms else None
    if isinstance(total, (int, float)) and total > 0:
        line += f" · {total / 1000:.1f} s"
    return clamp(line)


def short_location(location: str) -> str:
    """'Doc title > Section > Subsection' → 'Section › Subsection' (the document is named already)."""
    parts = [p.strip() for p in sanitize(location).split(" > ") if p.strip()]
    return shorten(" › ".join(parts[-2:]) if len(parts) > 2 else " › ".join(parts), 80)


def day_of(epoch: object) -> str | None:
    """'2026-03-14' (UTC) for a plausible epoch time, else None."""
    if not isinstance(epoch, (int, float)) or isinstance(epoch, bool) or not 0 < epoch < 32_503_680_000:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def trust_line(citation: Citation, people: Mapping[str, str] | None = None) -> str:
    """When the cited document was last updated, who uploaded it from Slack (their name, looked up by the
    caller: a mention would notify them every time they are cited), and whether it may be outdated."""
    parts = []
    if day := day_of(citation.updated_at):
        parts.append(f"updated {day}")
    if citation.uploaded_by:
        name = shorten((people or {}).get(citation.uploaded_by) or "", NAME_CHARS)
        parts.append(f"uploaded by {escape(name)}" if name else "uploaded from Slack")
    if citation.stale:
        parts.append(STALE_MARK)
    return " · ".join(parts)


def source_line(citation: Citation, people: Mapping[str, str] | None = None) -> str:
    document = shorten(citation.document, DOCUMENT_CHARS) or "document"
    url = safe_url(citation.source_url)
    title = mrkdwn_link(url, document) if url else f"*{escape(document)}*"
    parts = [f"*[{citation.n}]* {title}"]
    if location := short_location(citation.location or ""):
        parts.append(escape(location))
    if kb := shorten(citation.kb or "", NAME_CHARS):
        parts.append(f"_{escape(kb)}_")
    line = " · ".join(parts)
    if trust := trust_line(citation, people):
        line += f"\n{trust}"
    excerpt = shorten(citation.excerpt or "", EXCERPT_CHARS)
    if excerpt:
        line += f"\n“{escape(excerpt)}”"
    return clamp(line)


def _section(text: str) -> dict:
    return SectionBlock(text=MarkdownTextObject(text=clamp(text) or "…")).to_dict()


def _context(texts: Sequence[str]) -> dict:
    elements = [MarkdownTextObject(text=clamp(t)) for t in texts if t][:MAX_CONTEXT_ELEMENTS]
    return ContextBlock(elements=elements or [MarkdownTextObject(text="…")]).to_dict()


def sources_blocks(citations: Sequence[Citation], people: Mapping[str, str] | None = None) -> list[dict]:
    if not citations:
        return []
    blocks = [_section("*Sources*")]
    for citation in list(citations)[:MAX_SOURCES]:
        blocks.append(_context([source_line(citation, people)]))
    if len(citations) > MAX_SOURCES:
        blocks.append(_context([f"…and {len(citations) - MAX_SOURCES} more"]))
    return blocks


def feedback_block(answer_id: str) -> dict:
    answer_id = str(answer_id)[:200]
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


def trace_button_block(answer_id: str) -> dict:
    """The "How I found this" button (bot/slack/listeners/actions/trace_button.py answers it)."""
    answer_id = str(answer_id)[:200]
    return ActionsBlock(
        block_id=f"trace-{answer_id}",
        elements=[
            ButtonElement(
                text=TRACE_BUTTON_TEXT,
                action_id=TRACE_ACTION_ID,
                value=answer_id,
                accessibility_label="Show how this answer was found (only you will see it)",
            )
        ],
    ).to_dict()


def _notes(answer: Answer) -> list[str]:
    notes = [shorten(n, NOTE_CHARS) for n in answer.notes if n]
    return [f"_{escape(n)}_" for n in notes if n][:MAX_NOTES]


def _body_sections(mrkdwn: str, room: int) -> list[dict]:
    """The body as section blocks, at most `room` of them (the last one says it was shortened)."""
    pieces = [p for p in split_text(mrkdwn) if p]
    if len(pieces) > max(room, 1):
        pieces = pieces[: max(room, 1)]
        pieces[-1] = clamp(pieces[-1], SECTION_LIMIT - len(SHORTENED_NOTE) - 1) + "\n" + SHORTENED_NOTE
    return [_section(p) for p in pieces]


def render_answer(
    answer: Answer, answer_id: str | None = None, *, feedback: bool = True, people: Mapping[str, str] | None = None
) -> RenderedAnswer:
    """`people`: display names of the Slack users who uploaded cited documents (by user id)."""
    footer: list[dict] = sources_blocks(answer.citations, people) if answer.answered else []
    footer.append(_context([context_line(answer), *_notes(answer)]))
    if answer_id:  # recorded: its trace can be shown
        footer.append(trace_button_block(answer_id))
    if feedback and answer_id:
        footer.append(feedback_block(answer_id))
    divider = [DividerBlock().to_dict()] if answer.answered and answer.citations else []
    room = MAX_BLOCKS - len(footer) - len(divider)
    if answer.answered:
        head = _body_sections(to_mrkdwn(answer.answer, answer.citations), room) or [_section("…")]
        markdown = to_markdown(answer.answer, answer.citations) or "…"
        text = to_plain(answer.answer)
    else:
        head = [_section(NOT_FOUND_HEADING)]
        if answer.answer:
            head += _body_sections(to_mrkdwn(answer.answer), room - 1)
        markdown = "🔎 **The knowledge bases don't have enough to answer this.**"
        if answer.answer:
            markdown += "\n\n" + to_markdown(answer.answer, limit=MARKDOWN_LIMIT - len(markdown) - 2)
        text = NOT_FOUND_TEXT + (
            f" {to_plain(answer.answer, FALLBACK_LIMIT - len(NOT_FOUND_TEXT) - 1)}" if answer.answer else ""
        )
    blocks = head + divider + footer
    return RenderedAnswer(text=text, markdown=markdown, blocks=blocks[:MAX_BLOCKS], footer_blocks=footer[:MAX_BLOCKS])


def render_error(message: str) -> RenderedAnswer:
    text = clamp(f":warning: {escape(message)}", FALLBACK_LIMIT)
    markdown = ":warning: " + to_markdown(message, limit=MARKDOWN_LIMIT - 10)
    return RenderedAnswer(text=text, markdown=markdown, blocks=[_section(text)])
