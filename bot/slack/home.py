"""The App Home tab as a pure function of the application layer's `HomeView` (tested without Slack).

Everyone sees the KBs they may read (description, documents, last updated, the channels it answers in
first) and how to ask; a KB's uploaders and admins also see its failed documents, an Upload button and the
knowledge gaps. Everything from KBs, documents and people (names, descriptions, errors, questions, comments)
is content, rendered inert. The view stays within Slack's limits at any number of KBs and gaps: at most
100 blocks, every text at most 3000 characters.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from slack_sdk.models.blocks import (
    ButtonElement,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.core import FEEDBACK_REASONS, Gap, GapsReport, HomeView, KbView
from bot.slack.render import SECTION_LIMIT, TEXT_LIMIT, clamp, escape, shorten

MAX_HOME_BLOCKS = 100  # Slack's limit for a Home tab view
UPLOAD_ACTION_ID = "home_upload"
HOW_TO_ASK = (
    "*How to ask*\n"
    "• *@mention me* in a channel: I answer in the thread, from the knowledge bases allowed there "
    "(the channel's own first), with numbered sources\n"
    "• *DM me* (the Messages tab), or keep talking in a thread I answered\n"
    "• `/kb ask <question>` answers privately · `/kb list` · `/kb help`\n"
    "When the knowledge bases don't contain the answer, I say so. 👎 on an answer tells its owners what was wrong."
)
DESCRIPTION_CHARS = 300
NAME_CHARS = 80
FAILED_SHOWN = 5
FAILED_CHARS = 160
QUESTION_CHARS = 300
COMMENT_CHARS = 200
CHANNELS_SHOWN = 10
REASONS = set(FEEDBACK_REASONS)
UNAVAILABLE = ":warning: Sorry — I couldn't load your knowledge bases right now. Open this tab again in a minute."
MAX_GAPS = 25  # gap sections at most (the rest: "…and N more"), so KBs always keep most of the view
_CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,20}$")


def _section(text: str, accessory: ButtonElement | None = None) -> dict:
    return SectionBlock(text=MarkdownTextObject(text=clamp(text, SECTION_LIMIT) or "…"), accessory=accessory).to_dict()


def _context(text: str) -> dict:
    return ContextBlock(elements=[MarkdownTextObject(text=clamp(text, TEXT_LIMIT) or "…")]).to_dict()


def _header(text: str) -> dict:
    return HeaderBlock(text=shorten(text, 150)).to_dict()


def _day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def when(ts: float, now: float) -> str:
    """ "today", "yesterday", "5 days ago" (days in UTC), or the date for anything older than a month."""
    days = (int(now // 86400)) - int(ts // 86400)
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    return f"{days} days ago" if days <= 30 else _day(ts)


def channel_mentions(channels: Sequence[str]) -> str:
    """Channel links for real channel ids only (kb.toml is not trusted markup)."""
    shown = [f"<#{c}>" if _CHANNEL_ID.match(c) else f"`{escape(shorten(c, 40))}`" for c in channels[:CHANNELS_SHOWN]]
    if len(channels) > CHANNELS_SHOWN:
        shown.append(f"and {len(channels) - CHANNELS_SHOWN} more")
    return ", ".join(shown)


def kb_text(kb: KbView) -> str:
    count = len(kb.documents)
    parts = [f"*{escape(shorten(kb.name, NAME_CHARS)) or '(unnamed)'}*", f"{count} document{'s' if count != 1 else ''}"]
    if kb.last_updated:
        parts.append(f"last updated {_day(kb.last_updated)}")
    if kb.restricted:
        parts.append(":lock: restricted")
    lines = [" · ".join(parts)]
    if description := shorten(kb.description or "", DESCRIPTION_CHARS):
        lines.append(escape(description))
    if kb.channels:
        lines.append(f"Answers first in {channel_mentions(kb.channels)}")
    else:
        lines.append("No channel of its own: searched wherever it is allowed, after the channel's own KBs")
    if kb.note and kb.may_upload:
        lines.append(f"_{escape(shorten(kb.note, 300))}_")
    return "\n".join(lines)


def failed_text(kb: KbView) -> str | None:
    failed = kb.failed_documents
    if not failed:
        return None
    lines = [
        f":x: `{escape(shorten(d.name, 80))}` — {escape(shorten(d.error or 'failed', FAILED_CHARS))}"
        for d in failed[:FAILED_SHOWN]
    ]
    if len(failed) > FAILED_SHOWN:
        lines.append(f"…and {len(failed) - FAILED_SHOWN} more failed (`/kb list`)")
    return f"*Failed documents ({len(failed)})*\n" + "\n".join(lines)


def kb_blocks(kb: KbView) -> list[dict]:
    upload = ButtonElement(text="Upload", action_id=UPLOAD_ACTION_ID, value=kb.name) if kb.may_upload else None
    blocks = [_section(kb_text(kb), upload)]
    if kb.may_upload and (failed := failed_text(kb)):
        blocks.append(_context(failed))
    return blocks


def gap_text(gap: Gap, now: float) -> str:
    counts = []
    if gap.refused:
        counts.append(f":no_entry_sign: refused {gap.refused}×")
    if gap.disliked:
        reasons = ", ".join(f"{FEEDBACK_REASONS[r].lower()} {n}" for r, n in gap.reasons.items() if r in REASONS)
        counts.append(f":thumbsdown: {gap.disliked}×" + (f" ({reasons})" if reasons else ""))
    kbs = ", ".join(escape(shorten(k, NAME_CHARS)) for k in gap.kbs)
    lines = [
        f"*{escape(shorten(gap.question, QUESTION_CHARS)) or '(no words)'}*",
        " · ".join([*counts, f"last asked {when(gap.last_at, now)}", kbs]),
    ]
    lines += [f"> {escape(shorten(' '.join(c.split()), COMMENT_CHARS))}" for c in gap.comments]
    return "\n".join(lines)


def gaps_blocks(report: GapsReport, now: float) -> list[dict]:
    blocks = [
        DividerBlock().to_dict(),
        _header(f"Knowledge gaps — last {report.days} days"),
        _context(
            "Questions your knowledge bases could not answer, and answers people marked 👎, most frequent first "
            "(the same question in other words counts once). Add or fix the documents they need."
        ),
    ]
    gaps = report.gaps[:MAX_GAPS]
    if not gaps:
        blocks.append(_section(f"No refused questions or 👎 answers in the last {report.days} days. :tada:"))
    blocks += [_section(gap_text(g, now)) for g in gaps]
    if max(report.total, len(report.gaps)) > len(gaps):
        more = max(report.total, len(report.gaps)) - len(gaps)
        blocks.append(_context(f"…and {more} more (`kbbot report` lists them all)"))
    return blocks


def home_view(home: HomeView, now: float | None = None) -> dict:
    """The Home tab (`views.publish`): at most MAX_HOME_BLOCKS blocks whatever the number of KBs and gaps."""
    now = time.time() if now is None else now
    top = [_header("kbbot — answers from your knowledge bases"), _section(HOW_TO_ASK)]
    if home.note:
        top.append(_context(f":warning: {escape(shorten(home.note, 500))}"))
    top.append(_section("*Knowledge bases you can read*" if home.kbs else "*No knowledge bases are available to you.*"))
    bottom = gaps_blocks(home.gaps, now) if home.gaps is not None else []
    room = MAX_HOME_BLOCKS - len(top) - len(bottom) - 1  # one for "…and N more knowledge bases"
    middle: list[dict] = []
    shown = 0
    for kb in home.kbs:
        blocks = kb_blocks(kb)
        if len(middle) + len(blocks) > room:
            break
        middle += blocks
        shown += 1
    if shown < len(home.kbs):
        middle.append(_context(f"…and {len(home.kbs) - shown} more knowledge bases (`/kb list`)"))
    return {"type": "home", "blocks": (top + middle + bottom)[:MAX_HOME_BLOCKS]}


def unavailable_view() -> dict:
    return {
        "type": "home",
        "blocks": [
            _header("kbbot — answers from your knowledge bases"),
            _section(UNAVAILABLE),
            _section(HOW_TO_ASK),
        ],
    }
