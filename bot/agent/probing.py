"""Retrieval probes: each KB searched for a query and scored for routing (bot.agent.routing).

A probe's search is also the round's evidence, so nothing is searched twice. The KB descriptions'
vectors are cached here (per KB, until its description changes), and a thread's earlier questions
and answers are probed too, so that a follow-up stays with the KB its thread is about.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from bot.agent import grading, messages, routing
from bot.agent.models import KbTarget, Turn
from tools.search import Evidence, HybridSearcher, SearchResult
from tools.text import identifiers

EVIDENCE_PER_KB = 8
EVIDENCE_TOTAL = 8

Probes = dict[str, routing.KbProbe]


class Prober:
    def __init__(self, searcher: HybridSearcher):
        self.searcher = searcher
        self.embedder = searcher.embedder
        self._descriptions: dict[str, tuple[str, np.ndarray]] = {}
        self._lock = threading.Lock()

    def description_vector(self, target: KbTarget | None) -> np.ndarray | None:
        if target is None or not target.description:
            return None
        kb = target.name
        cached = self._descriptions.get(kb)
        if cached is None or cached[0] != target.description:
            vector = self.embedder.embed_query(f"{kb}: {target.description}")
            cached = (target.description, vector)
            with self._lock:
                self._descriptions[kb] = cached
        return cached[1]

    def probe(
        self, query: str, kbs: Sequence[str], targets: Mapping[str, KbTarget], judge: str | None = None
    ) -> Probes:
        """Search each KB for `query`. A later round's rephrasing passes the question it must answer as
        `judge`: its evidence is scored by that question's vector (see the grade step)."""
        query_vector = self.embedder.embed_query(query)
        judge_vector = self.embedder.embed_query(judge) if judge is not None and judge != query else None
        names = identifiers(query)
        probes = {}
        for kb in kbs:
            result = self.searcher.search(
                query, kb, k=EVIDENCE_PER_KB, query_vector=query_vector, judge_vector=judge_vector
            )
            description = self.description_vector(targets.get(kb))
            similarity = float(np.dot(query_vector, description)) if description is not None else 0.0
            exact = bool(names) and any(grading.names_all(e, names) for e in result.evidence)
            # Units are judged like the chunks: against the question the search must answer.
            vector = query_vector if judge_vector is None else judge_vector
            result, best_units = self.ranked_by_units(judge or query, result, vector)
            best_unit = max((u for u in best_units[: grading.UNIT_CHUNKS] if u is not None), default=None)
            probes[kb] = routing.KbProbe(kb, result, similarity, names_identifiers=exact, best_unit=best_unit)
        return probes

    def ranked_by_units(
        self, query: str, result: SearchResult, query_vector: np.ndarray
    ) -> tuple[SearchResult, list[float | None]]:
        """The result re-ranked with each chunk's best answer unit (routing.unit_score, by the vectors saved at
        ingest), and those unit scores in the new order (None: the chunk has no unit vectors). The search
        ranks whole chunks; a chunk whose one sentence states the answer goes before a chunk of another
        document that matches the question's words as a whole."""
        evidence = result.evidence
        chunks = [e.chunk for e in evidence]
        saved = self.searcher.store.unit_vectors(self.embedder.model_name, self.embedder.dimension, chunks)
        if not saved:
            return result, [None] * len(evidence)
        terms = grading.QueryTerms.of(query)
        best = [
            routing.unit_score(
                (cosine, coverage) for _, cosine, coverage in grading.unit_measures(terms, e, query_vector, saved)
            )
            for e in evidence
        ]
        rescored = [
            (replace(e, score=routing.unit_ranked_score(e.score, e.cosine, unit)), unit)
            for e, unit in zip(evidence, best, strict=True)
        ]
        rescored.sort(key=lambda pair: pair[0].score, reverse=True)
        return replace(result, evidence=[e for e, _ in rescored]), [u for _, u in rescored]

    def with_thread_scores(self, probes: Probes, history: Sequence[Turn], targets: Mapping[str, KbTarget]) -> Probes:
        """The probes, each KB credited with how well it matched the thread's earlier questions and answers."""
        totals = dict.fromkeys(probes, 0.0)
        for role in ("user", "assistant"):
            turns = [t.text for t in history if t.role == role]
            turns = [t for t in turns if t.strip() and not messages.is_fixed_reply(t)][-routing.THREAD_TURNS :]
            for text in turns:
                for kb, probe in self.probe(text, list(probes), targets).items():
                    totals[kb] += probe.evidence_score / len(turns)
        if not any(totals.values()):
            return probes
        return {kb: replace(p, thread_score=totals[kb]) for kb, p in probes.items()}


def evidence_of(probes: Probes, kbs: Sequence[str]) -> list[Evidence]:
    """The searched KBs' evidence, merged: the best EVIDENCE_TOTAL by score."""
    return merge_evidence([probes[kb].result for kb in kbs if kb in probes])


def merge_evidence(results: Sequence[SearchResult]) -> list[Evidence]:
    merged = [e for r in results for e in r.evidence]
    merged.sort(key=lambda e: e.score, reverse=True)
    return merged[:EVIDENCE_TOTAL]
