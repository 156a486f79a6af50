"""Hybrid retrieval over one knowledge base: dense (Chroma) + keyword (BM25), fused.

Every candidate from either side gets *both* scores (its cosine similarity and its BM25 score),
so the fusion can weigh real evidence instead of ranks alone, and the engine gets calibrated
signals (best cosine, keyword coverage) to judge whether the evidence is sufficient.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from tools.embeddings import Embedder
from tools.store import KnowledgeStore, StoredChunk
from tools.text import content_terms


@dataclass(frozen=True)
class SearchConfig:
    candidates: int = 50  # per side, before fusion
    # Weighted fusion of cosine and max-normalised BM25; rrf_k > 0 switches to reciprocal rank fusion.
    dense_weight: float = 0.6
    rrf_k: int = 0


@dataclass
class Evidence:
    chunk: StoredChunk
    score: float  # fused, for ranking within one query
    cosine: float  # dense similarity to the query, in [-1, 1]
    bm25: float  # raw BM25 score (0 when no query term matches)
    coverage: float = 0.0  # share of the query's content terms found in the chunk (+ its header)

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id


@dataclass
class SearchResult:
    kb: str
    query: str
    evidence: list[Evidence]
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def best_cosine(self) -> float:
        return max((e.cosine for e in self.evidence), default=0.0)

    @property
    def best_coverage(self) -> float:
        return max((e.coverage for e in self.evidence[:5]), default=0.0)


class HybridSearcher:
    def __init__(self, store: KnowledgeStore, embedder: Embedder, config: SearchConfig | None = None):
        self.store = store
        self.embedder = embedder
        self.config = config or SearchConfig()

    def search(self, query: str, kb: str, k: int = 8, query_vector: np.ndarray | None = None) -> SearchResult:
        timings: dict[str, float] = {}
        started = time.perf_counter()
        if query_vector is None:
            query_vector = self.embedder.embed_query(query)
        timings["embed"] = _ms(started)

        t = time.perf_counter()
        dense_hits = self.store.dense_search(kb, query_vector, self.config.candidates)
        timings["dense"] = _ms(t)

        t = time.perf_counter()
        keyword = self.store.keyword_index(kb)
        bm25_all = keyword.scores(query)
        keyword_hits = keyword.top(bm25_all, self.config.candidates) if bm25_all is not None else []
        timings["keyword"] = _ms(t)

        t = time.perf_counter()
        candidates: dict[str, Evidence] = {}
        for chunk, cosine in dense_hits:
            bm25 = float(bm25_all[keyword.position[chunk.chunk_id]]) if bm25_all is not None and chunk.chunk_id in keyword.position else 0.0
            candidates[chunk.chunk_id] = Evidence(chunk, 0.0, cosine, bm25)
        missing = [cid for cid, _ in keyword_hits if cid not in candidates]
        if missing:
            for chunk, vector in self.store.get_chunks_with_vectors(kb, missing):
                bm25 = float(bm25_all[keyword.position[chunk.chunk_id]])  # type: ignore[index]
                candidates[chunk.chunk_id] = Evidence(chunk, 0.0, float(np.dot(vector, query_vector)), bm25)
        fused = self._fuse(list(candidates.values()), dense_hits, keyword_hits)
        query_terms = content_terms(query)
        for evidence in fused[:k]:
            evidence.coverage = _coverage(query_terms, evidence.chunk)
        timings["fuse"] = _ms(t)
        timings["total"] = _ms(started)
        return SearchResult(kb, query, fused[:k], timings)

    def _fuse(self, candidates: list[Evidence], dense_hits, keyword_hits) -> list[Evidence]:
        if not candidates:
            return []
        if self.config.rrf_k > 0:
            ranks: dict[str, float] = {}
            for ranking in ([c.chunk_id for c, _ in dense_hits], [cid for cid, _ in keyword_hits]):
                for rank, cid in enumerate(ranking):
                    ranks[cid] = ranks.get(cid, 0.0) + 1.0 / (self.config.rrf_k + rank + 1)
            for e in candidates:
                e.score = ranks.get(e.chunk_id, 0.0)
        else:
            top_bm25 = max(e.bm25 for e in candidates) or 1.0
            w = self.config.dense_weight
            for e in candidates:
                e.score = w * e.cosine + (1 - w) * (e.bm25 / top_bm25)
        return sorted(candidates, key=lambda e: e.score, reverse=True)


def _coverage(query_terms: set[str], chunk: StoredChunk) -> float:
    if not query_terms:
        return 0.0
    chunk_terms = content_terms(f"{chunk.header}\n{chunk.text}")
    return len(query_terms & chunk_terms) / len(query_terms)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)
