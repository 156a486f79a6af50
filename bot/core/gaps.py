"""Knowledge gaps: the questions the KBs could not answer (refusals) and the answers people marked 👎.

The records keep one *signal* per refusal and per person's 👎 on an answer, stored once for each KB it
concerns (indexed by KB and time), with a grouping key: people asking the same thing in other words —
"How many vacation days do we get?", "vacation days: how many?" — land in one gap. App Home and
`kbbot report` both show `GapsReport`, built here from what the records return and what the
permissions let the viewer see.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

REFUSED, DISLIKED = "refused", "disliked"

# Why an answer was not helpful (the 👎 reason modal); the codes are what the records keep.
FEEDBACK_REASONS = {
    "wrong": "Wrong",
    "outdated": "Outdated",
    "incomplete": "Incomplete",
    "not_what_i_asked": "Not what I asked",
}
COMMENT_CHARS = 1000
DEFAULT_DAYS = 30
MAX_DAYS = 3650

_WORD = re.compile(r"\w+")
# Words that carry no subject: two questions that differ only in these ask the same thing.
_STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be been before being below between both but by
    can could did do does doing down during each else ever few for from further get gets getting got had has have
    having he her here hers him his how i if in into is it its just know let like many me might more most much must
    my need no nor not now of off on once only or other our ours out over own please same shall she should so some
    such tell than that the their them then there these they this those through to too under until up us very was
    we were what when where which while who whom why will with would you your yours""".split()  # noqa: SIM905
)


def gap_key(question: str) -> str:
    """The question's content words, lowercased, lightly stemmed, deduplicated and sorted: the same
    question asked in other words gets the same key. A question of stop words only keys on all its words."""
    text = unicodedata.normalize("NFKC", question or "").casefold()
    words = _WORD.findall(text)
    content = {_stem(w) for w in words if w not in _STOPWORDS}
    return " ".join(sorted(content or {_stem(w) for w in words}))[:500]


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@dataclass(frozen=True)
class Gap:
    """One question (however it was worded) the KBs did not serve well."""

    question: str  # the latest wording (its standalone query)
    kbs: tuple[str, ...]  # the KBs it concerns
    count: int  # refusals + 👎
    refused: int
    disliked: int
    last_at: float  # when it was last asked (or disliked)
    reasons: dict[str, int] = field(default_factory=dict)  # 👎 reason code -> how many
    comments: tuple[str, ...] = ()  # the latest free-text comments

    def to_json(self) -> dict:
        return {
            "question": self.question,
            "kbs": list(self.kbs),
            "count": self.count,
            "refused": self.refused,
            "disliked": self.disliked,
            "reasons": dict(self.reasons),
            "comments": list(self.comments),
            "last_at": self.last_at,
        }


@dataclass(frozen=True)
class GapsReport:
    days: int
    since: float
    kbs: tuple[str, ...]  # the KBs whose gaps the viewer may see (and that were looked at)
    gaps: tuple[Gap, ...]  # most frequent first
    total: int  # gaps found, before the limit

    def to_json(self) -> dict:
        return {
            "days": self.days,
            "since": self.since,
            "kbs": list(self.kbs),
            "total": self.total,
            "gaps": [g.to_json() for g in self.gaps],
        }


@dataclass(frozen=True)
class GapRow:
    """What the records return: signals of one (key, scope, kind, reason), counted."""

    key: str
    scope: tuple[str, ...]  # every KB the signals concern
    kind: str
    reason: str | None
    count: int
    last_at: float
    question: str


@dataclass
class _Merging:
    question: str = ""
    last_at: float = 0.0
    kbs: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=lambda: {REFUSED: 0, DISLIKED: 0})
    reasons: dict[str, int] = field(default_factory=dict)


def merge_gaps(
    rows: Iterable[GapRow],
    comments: Iterable[tuple[str, tuple[str, ...], str]],
    visible: Callable[[tuple[str, ...]], bool],
    shown_kbs: Iterable[str],
    limit: int,
) -> tuple[list[Gap], int]:
    """Gaps from the records' rows: rows whose scope the viewer may not see are dropped (`visible`, from the
    permissions), the rest merged by key, most frequent (then most recent) first. `comments` are
    (key, scope, text), newest first. Returns the first `limit` gaps and how many there are."""
    shown = set(shown_kbs)
    merged: dict[str, _Merging] = {}
    for row in rows:
        if not visible(row.scope):
            continue
        gap = merged.setdefault(row.key, _Merging())
        if row.last_at >= gap.last_at:
            gap.last_at, gap.question = row.last_at, row.question
        gap.kbs.update(kb for kb in row.scope if kb in shown)
        gap.counts[row.kind] = gap.counts.get(row.kind, 0) + row.count
        if row.kind == DISLIKED and row.reason in FEEDBACK_REASONS:
            gap.reasons[row.reason] = gap.reasons.get(row.reason, 0) + row.count
    notes: dict[str, list[str]] = {}
    for key, scope, text in comments:
        if key in merged and visible(scope) and len(notes.setdefault(key, [])) < 3 and text not in notes[key]:
            notes[key].append(text)
    gaps = [
        Gap(
            question=m.question,
            kbs=tuple(sorted(m.kbs)),
            count=m.counts[REFUSED] + m.counts[DISLIKED],
            refused=m.counts[REFUSED],
            disliked=m.counts[DISLIKED],
            last_at=m.last_at,
            reasons=dict(sorted(m.reasons.items(), key=lambda kv: -kv[1])),
            comments=tuple(notes.get(key, ())),
        )
        for key, m in merged.items()
    ]
    gaps.sort(key=lambda g: (-g.count, -g.last_at, g.question))
    return gaps[:limit], len(gaps)


def clean_comment(text: object) -> str | None:
    """A 👎 comment as kept: plain text, trimmed, at most COMMENT_CHARS; None when empty."""
    if not isinstance(text, str):
        return None
    text = "".join(ch for ch in unicodedata.normalize("NFKC", text) if ch == "\n" or unicodedata.category(ch)[0] != "C")
    text = text.strip()[:COMMENT_CHARS]
    return text or None
