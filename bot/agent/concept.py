"""Does the best evidence speak about the concept the question asks about?

An out-of-KB question on a KB's own topic ("what's the FY2027 bonus pool?") finds passages that read like an
answer — a high cosine, most of the question's words — but never about the one thing asked ("pool"). Term
ablation with the local model says which of the question's words carry its meaning and whether the evidence
responds to them: for a word t, q∖t is the question without it; t's importance is 1 − cos(q, q∖t), and a unit
u's response to t is cos(q, u) − cos(q∖t, u), how much closer u is to the question because of t. A word some
best chunk states (by stem, headings included) is answered; one none states but a close unit responds to is
answered by a synonym or a paraphrase ("401(k)" for "401k", "truck" priced "per vehicle"). The question's
least-answered word is the signal: its importance less half the strongest response to it.

Only words no best chunk states are ablated, so most questions cost no encode at all; the others cost one batch
of short texts. Chinese questions are left out on purpose: MiniLM scores any Chinese text as close to any Chinese
question, so its ablations say nothing (grade_cjk judges them on words).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tools.text import content_terms, has_cjk, keyword_terms

# A response counts for half: a synonym moves a unit's cosine by a fraction of what the word moves the question's.
RESPONSE_WEIGHT = 0.5
UNIT_REACH = 5  # the closest units whose response is read
# An unstated word whose importance, less RESPONSE_WEIGHT × the strongest response to it, reaches this is a
# concept the evidence does not speak about (chosen on half of company dev, docs/benchmarks.md, session 9).
UNHEARD_GAP = 0.18

# A word of the question as written: identifiers and hyphenated names whole ("dispatch-db", "401(k)", "v2").
_WORD = re.compile(r"[A-Za-z0-9][\w()'.:/-]*[A-Za-z0-9)]|[A-Za-z0-9]")


def ablation_words(query: str, asked: set[str]) -> list[str]:
    """The question's words whose stems are all among its `asked` terms (grading.asked_terms), once each."""
    found: dict[str, None] = {}
    for match in _WORD.finditer(query):
        word = match.group(0)
        if word.endswith(")") and "(" not in word:  # "(vacation days)": the bracket closes a phrase
            word = word.rstrip(")")
        stems = _stems(word)
        if stems and stems <= asked:
            found.setdefault(word, None)
    return list(found)


def without(query: str, word: str) -> str:
    """The query with `word` (as a whole word, every time) taken out."""
    return " ".join(re.sub(rf"(?<![\w-]){re.escape(word)}(?![\w-])", " ", query).split())


def _stems(word: str) -> set[str]:
    return {t for t in keyword_terms(word) if len(t) > 1}


@dataclass(frozen=True)
class Unheard:
    """The question's word the evidence least speaks about."""

    word: str
    importance: float  # 1 − cos(q, q∖word)
    response: float  # the strongest response to it among the closest units

    @property
    def gap(self) -> float:
        return self.importance - RESPONSE_WEIGHT * self.response


def unheard_word(
    query: str,
    asked: set[str],
    texts: Sequence[str],
    query_vector: np.ndarray,
    unit_vectors: np.ndarray,
    encode: Callable[[Sequence[str]], np.ndarray],
) -> Unheard | None:
    """The word of `query` with the largest gap, among those no text of `texts` (the best chunks with their
    headings) states, judged by the closest units (`unit_vectors`, best cosine first); None when every word is
    stated, or for a Chinese question. `encode` embeds a batch of texts (unit-normalised rows)."""
    if has_cjk(query) or not len(unit_vectors):
        return None
    stated = set().union(*(content_terms(text) for text in texts)) if texts else set()
    words = [w for w in ablation_words(query, asked) if not _stems(w) <= stated]
    if not words:
        return None
    ablated = np.asarray(encode([without(query, w) for w in words]), dtype=np.float32)
    closest = np.asarray(unit_vectors[:UNIT_REACH], dtype=np.float32)
    importance = 1.0 - ablated @ query_vector
    response = (closest @ query_vector)[None, :] - ablated @ closest.T  # (words, units)
    gaps = [Unheard(w, float(importance[i]), float(response[i].max())) for i, w in enumerate(words)]
    return max(gaps, key=lambda g: g.gap)
