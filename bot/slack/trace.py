"""Block Kit for "How I found this": one recorded answer's trace, as a pure function (tested without Slack).

It shows what `KnowledgeBot.trace` read back from the answer's stored record — the standalone query, the
KBs considered with their scores, each round (query, KBs, verdict, reason) with its best evidence (score,
document, location) — and nothing else: the façade has already decided the person may see it here.
Everything in it is content (queries, reasons, KB and document names, locations) and rendered inert
(`render.escape`). Any trace fits Slack's limits: at most 50 blocks, every text object at most 3000
characters, rounds and evidence capped with "…and N more".
"""

from __future__ import annotations

from slack_sdk.models.blocks import ContextBlock, MarkdownTextObject, SectionBlock

from bot.core import AnswerTrace, EvidenceNote, TracedRound
from bot.slack.render import (
    DOCUMENT_CHARS,
    MAX_BLOCKS,
    NAME_CHARS,
    SECTION_LIMIT,
    TEXT_LIMIT,
    clamp,
    day_of,
    escape,
    short_location,
    shorten,
)

QUERY_CHARS = 300
REASON_CHARS = 300
NOTE_CHARS = 200
MAX_KBS_SHOWN = 15
MAX_ROUNDS_SHOWN = 10  # the engine runs at most 3; a record is still read whatever it holds
MAX_EVIDENCE_SHOWN = 5
MAX_CITED_SHOWN = 10
MAX_NOTES = 3
HEADING = ":mag: *How I found this*"
REFUSED = (
    ":lock: I can't show how this answer was found here: it drew on a knowledge base you can't read in "
    "this conversation."
)
GONE = ":grey_question: I have no record of that answer any more, so I can't show how it was found."
FAILED = ":warning: Sorry — I couldn't load how this answer was found. Please try again in a minute."


def _section(text: str) -> dict:
    return SectionBlock(text=MarkdownTextObject(text=clamp(text, SECTION_LIMIT) or "…")).to_dict()


def _context(text: str) -> dict:
    return ContextBlock(elements=[MarkdownTextObject(text=clamp(text, TEXT_LIMIT) or "…")]).to_dict()


def _quoted(text: str, limit: int) -> str:
    return f"“{escape(shorten(text, limit))}”"


def _kb(name: str) -> str:
    return f"`{escape(shorten(name, NAME_CHARS))}`"


def _score(value: float) -> str:
    return f"{value:.3f}"


def _more(lines: list[str], total: int, shown: int, what: str) -> list[str]:
    return [*lines, f"…and {total - shown} more {what}"] if total > shown else lines


def kbs_considered(trace: AnswerTrace) -> str:
    chosen = set(trace.route_kbs)
    scored = list(trace.route_scores)
    lines = [
        f"• {_kb(kb)} {_score(score)}" + (" — searched" if kb in chosen else "") for kb, score in scored[:MAX_KBS_SHOWN]
    ]
    lines = _more(lines, len(scored), len(scored[:MAX_KBS_SHOWN]), "knowledge bases")
    method = {"llm": "chosen by the LLM", "pinned": "named in the question", "offline": "chosen by their scores"}
    head = f"*Knowledge bases considered* ({method.get(trace.route_method, escape(trace.route_method))})"
    return head + "\n" + ("\n".join(lines) if lines else "_none: no knowledge base was available here_")


def evidence_line(evidence: EvidenceNote) -> str:
    parts = [f"`{_score(evidence.score)}`", f"*{escape(shorten(evidence.document, DOCUMENT_CHARS)) or 'document'}*"]
    if location := short_location(evidence.location or ""):
        parts.append(escape(location))
    parts.append(f"_{escape(shorten(evidence.kb, NAME_CHARS))}_")
    if evidence.cosine != evidence.score:
        parts.append(f"cosine {_score(evidence.cosine)}")
    return " · ".join(parts)


def round_blocks(number: int, traced: TracedRound) -> list[dict]:
    kbs = ", ".join(_kb(kb) for kb in traced.kbs[:MAX_KBS_SHOWN]) or "no knowledge base"
    verdict = ":white_check_mark: enough evidence" if traced.sufficient else ":x: not enough evidence"
    judge = " (LLM)" if traced.policy == "llm" else ""
    text = f"*Round {number}* — searched {kbs} for {_quoted(traced.query, QUERY_CHARS)}\n{verdict}{judge}"
    if reason := shorten(traced.reason, REASON_CHARS):
        text += f": {escape(reason)}"
    blocks = [_section(text)]
    evidence = list(traced.evidence)
    if evidence:
        lines = [evidence_line(e) for e in evidence[:MAX_EVIDENCE_SHOWN]]
        blocks.append(_context("\n".join(_more(lines, len(evidence), len(lines), "passages"))))
    return blocks


def outcome_line(trace: AnswerTrace) -> str:
    if trace.answered:
        cited = [
            f"[{c.n}] {escape(shorten(c.document, DOCUMENT_CHARS))} (_{escape(shorten(c.kb, NAME_CHARS))}_)"
            for c in trace.citations[:MAX_CITED_SHOWN]
        ]
        cited = _more(cited, len(trace.citations), len(cited), "sources")
        line = ":books: Answered, citing " + (", ".join(cited) or "nothing")
    else:
        line = ":mag_right: Not answered: the knowledge bases searched didn't have enough"
    details = ["LLM" if trace.mode == "llm" else "offline"]
    if trace.total_ms is not None and trace.total_ms > 0:
        details.append(f"{trace.total_ms / 1000:.1f} s")
    if day := day_of(trace.at):
        details.append(f"answered {day}")
    return f"{line}\n{' · '.join(details)}"


def trace_blocks(trace: AnswerTrace) -> list[dict]:
    """The trace as an ephemeral message's blocks (within Slack's limits, whatever the record holds)."""
    head = f"{HEADING}\n*Question:* {_quoted(trace.question, QUERY_CHARS)}"
    head += f"\n*Standalone query:* {_quoted(trace.standalone_query, QUERY_CHARS)}"
    blocks = [_section(head), _section(kbs_considered(trace))]
    rounds = list(trace.rounds)
    for number, traced in enumerate(rounds[:MAX_ROUNDS_SHOWN], start=1):
        blocks += round_blocks(number, traced)
    if len(rounds) > MAX_ROUNDS_SHOWN:
        blocks.append(_context(f"…and {len(rounds) - MAX_ROUNDS_SHOWN} more rounds"))
    footer = [outcome_line(trace)]
    footer += [f"_{escape(shorten(n, NOTE_CHARS))}_" for n in trace.notes[:MAX_NOTES] if n]
    blocks.append(_context("\n".join(footer)))
    return blocks[:MAX_BLOCKS]


def trace_text(trace: AnswerTrace) -> str:
    """The ephemeral message's fallback text (notifications, screen readers)."""
    return clamp(f"How I found this: {escape(shorten(trace.standalone_query, QUERY_CHARS))}", TEXT_LIMIT)
