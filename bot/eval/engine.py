"""The real application over benchmark KBs, limited to the KBs a benchmark case names.

Limiting the KBs (an eval `Origin`) is how a leave-one-out case "rebuilds without" a dataset: each KB
has its own collection and keyword index, so the remaining KBs are exactly what a store built without
the left-out one would hold, and nothing is re-ingested.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.core import KnowledgeBot, Origin, Turn
from bot.eval.workspace import EvalWorkspace


@dataclass
class ScopedBot:
    """Asks `bot` as a benchmark case would: from an eval origin that may use only `kbs`."""

    bot: KnowledgeBot
    kbs: frozenset[str]

    @property
    def mode(self) -> str:
        return self.bot.mode

    def limit(self, kbs: Iterable[str]) -> None:
        self.kbs = frozenset(kbs)

    def answer(self, question: str, history: Sequence[Turn] = (), kb: str | None = None):
        return self.bot.ask(Origin.eval(self.kbs), question, history, kb).answer


def make_engine(ws: EvalWorkspace, kbs: Iterable[str]) -> ScopedBot:
    return ScopedBot(ws.bot, frozenset(kbs))


@dataclass
class Asked:
    status: str
    top_kb: str | None
    route_kbs: list[str]
    standalone: str
    citations: list
    rounds: int
    ms: float
    answer: str
    graded: list[dict]  # per round: its query, KBs, verdict, reason, best documents and measured features


def graded_rounds(answer) -> list[dict]:
    """What each round of `answer` was judged on, for a benchmark's per-question dump."""
    return [
        {
            "query": r.query,
            "kbs": list(r.kbs),
            "sufficient": r.sufficient,
            "reason": r.reason,
            "documents": [f"{e.kb}/{e.document}" for e in r.evidence],
            "features": dict(r.features),
            "sufficiency": r.sufficiency,
        }
        for r in answer.rounds
    ]


def ask(engine: ScopedBot, question: str, history: Sequence[Turn] = (), kb: str | None = None) -> Asked:
    started = time.perf_counter()
    answer = engine.answer(question, history, kb=kb)
    ms = (time.perf_counter() - started) * 1000
    scores = answer.route.scores or {}
    top = max(scores, key=lambda k: scores[k]) if scores else (answer.route.kbs[0] if answer.route.kbs else None)
    return Asked(
        answer.status,
        top,
        list(answer.route.kbs),
        answer.standalone_query,
        answer.citations,
        len(answer.rounds),
        ms,
        answer.answer,
        graded_rounds(answer),
    )


def progress(ws: EvalWorkspace, total: int, desc: str):
    if not ws.progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", leave=False)
