"""The real answer engine over benchmark KBs, limited to the KBs a benchmark case names.

Limiting the candidate KBs is how a leave-one-out case "rebuilds without" a dataset: each KB has its
own collection and keyword index, so the remaining KBs are exactly what a store built without the
left-out one would hold, and nothing is re-ingested.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.eval.workspace import EvalWorkspace


def make_engine(ws: EvalWorkspace, kbs: Iterable[str]):
    from bot.agent.engine import AnswerEngine

    class ScopedEngine(AnswerEngine):
        allowed: set[str]

        def candidate_kbs(self, manifests, scope, pinned):  # type: ignore[override]
            return [kb for kb in super().candidate_kbs(manifests, scope, pinned) if kb in self.allowed]

    engine = ScopedEngine(ws.service, ws.settings)
    engine.allowed = set(kbs)
    return engine


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


def ask(engine, question: str, history: Sequence = (), kb: str | None = None) -> Asked:
    started = time.perf_counter()
    answer = engine.answer(question, history, kb=kb)
    ms = (time.perf_counter() - started) * 1000
    scores = answer.route.scores or {}
    top = max(scores, key=lambda k: scores[k]) if scores else (answer.route.kbs[0] if answer.route.kbs else None)
    return Asked(answer.status, top, list(answer.route.kbs), answer.standalone_query, answer.citations,
                 len(answer.rounds), ms, answer.answer)


def progress(ws: EvalWorkspace, total: int, desc: str):
    if not ws.progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", leave=False)
