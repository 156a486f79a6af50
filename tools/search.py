"""Hybrid retrieval over one knowledge base: dense (cosine) + keyword (BM25), fused.

Every candidate from either side gets *both* scores (its cosine similarity and its BM25 score),
so the fusion can weigh real evidence instead of ranks alone, and the engine gets calibrated
signals (best cosine, keyword coverage) to judge whether the evidence is sufficient.

How it ranks (tuned on SciFact train, checked on Cranfield/CISI; numbers in docs/benchmarks.md):
- keyword: BM25 of the chunk plus BM25 of its whole document (tools/keyword_index.py);
- dense: the chunk's cosine, blended with the cosine of its document's mean chunk vector
  (DOCUMENT_DENSE_WEIGHT), so a chunk of a document that is about the query as a whole gains;
- fusion: 0.65·dense + 0.35·BM25/max BM25 over the candidates (the top
  `candidates` of each side). This convex fusion beat reciprocal-rank fusion by ~0.015 nDCG@10.
Evidence.cosine stays the chunk's own cosine: the engine's thresholds are calibrated on it.

Speed: each KB's live vectors are held in memory per KB generation (like the keyword index), so
dense scoring is one exact matrix-vector product instead of an approximate Chroma query plus a
second round-trip for the keyword-only candidates' vectors. KBs larger than SNAPSHOT_MAX_CHUNKS
use Chroma's index instead.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tools.embeddings import Embedder
from tools.keyword_index import KeywordIndex
from tools.store import LIVE_PAGE, EmbeddingModelMismatch, KnowledgeStore, StoredChunk, chunk_from_metadata
from tools.text import content_terms, joined_terms

log = logging.getLogger(__name__)

SNAPSHOT_MAX_CHUNKS = 150_000  # 384-d float32: ~230 MB at the limit
CHUNK_CACHE = 20_000  # chunk texts kept per snapshot (read for the evidence searches return)
SAVE_AFTER_CHUNKS = 1000  # a saved snapshot this far behind its index is saved again after catching up
DOCUMENT_DENSE_WEIGHT = 0.5


@dataclass(frozen=True)
class SearchConfig:
    candidates: int = 100  # per side, before fusion (at least k)
    # Weighted fusion of cosine and max-normalised BM25; rrf_k > 0 switches to reciprocal rank fusion.
    dense_weight: float = 0.65
    rrf_k: int = 0
    document_dense_weight: float = DOCUMENT_DENSE_WEIGHT


@dataclass
class Evidence:
    chunk: StoredChunk
    score: float  # fused, for ranking within one query
    cosine: float  # dense similarity to the query (or to the judge vector the search was given), in [-1, 1]
    bm25: float  # BM25 score, chunk + document level (0 when no query term matches)
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


@dataclass
class _Snapshot:
    """A KB generation's live vectors, aligned with its keyword index's positions. Chunk texts are read
    from the collection only for the evidence a search returns (and kept in `chunks`, bounded)."""

    index: KeywordIndex
    vectors: np.ndarray  # (n, d), normalised
    present: np.ndarray  # bool (n,): the chunk was found in the collection
    documents: np.ndarray | None  # (n_docs, d) normalised mean chunk vector per document
    owner: np.ndarray | None  # chunk position -> document position
    chunks: dict[int, StoredChunk] = field(default_factory=dict)


def _sum_rows_by_owner(vectors: np.ndarray, owner: np.ndarray, owners: int) -> np.ndarray:
    """Row i of the result is the sum of the `vectors` rows whose `owner` is i (`owners` rows, float32).

    The same sums as `np.add.at(result, owner, vectors)`, as one sparse product: ufunc.at goes row by row and
    was most of a cold start's snapshot loading at 100k chunks (docs/benchmarks.md, Cold start)."""
    from scipy.sparse import csr_matrix  # loaded with bm25s already

    owner = np.asarray(owner, dtype=np.int64)
    members = csr_matrix(
        (np.ones(len(owner), dtype=np.float32), (owner, np.arange(len(owner)))), shape=(owners, len(owner))
    )
    return np.asarray(members @ vectors, dtype=np.float32)


class HybridSearcher:
    def __init__(self, store: KnowledgeStore, embedder: Embedder, config: SearchConfig | None = None):
        self.store = store
        self.embedder = embedder
        self.config = config or SearchConfig()
        self._snapshots: dict[str, _Snapshot] = {}
        self._collections: dict[str, str] = {}  # the collection each snapshot's vectors were read from
        self._lock = threading.Lock()

    def search(
        self,
        query: str,
        kb: str,
        k: int = 8,
        query_vector: np.ndarray | None = None,
        judge_vector: np.ndarray | None = None,
    ) -> SearchResult:
        """The top k chunks for `query`. With `judge_vector`, the evidence is ranked for the query but its
        `cosine` is measured against that vector: a reformulated search is judged by the question it must
        answer, so rephrasing can find new evidence but never makes weak evidence look strong."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        mismatch = self.store.model_mismatch(kb, self.embedder.model_name, self.embedder.dimension)
        if mismatch:  # vectors of another model would rank garbage (or fail on the dimension)
            raise EmbeddingModelMismatch(mismatch)
        if query_vector is None:
            query_vector = self.embedder.embed_query(query)
        timings["embed"] = _ms(started)

        t = time.perf_counter()
        keyword = self.store.keyword_index(kb)
        bm25_all = keyword.scores(query)
        timings["keyword"] = _ms(t)

        n = max(self.config.candidates, k)
        snapshot = self._snapshot(kb, keyword)
        if snapshot is None:
            fused = self._search_chroma(kb, query_vector, keyword, bm25_all, n, timings)
        else:
            fused = self._search_snapshot(kb, snapshot, query_vector, bm25_all, n, k, timings)

        t = time.perf_counter()
        query_terms = content_terms(query)
        counts = keyword.term_counts(query_terms) if snapshot is not None and query_terms else None
        for evidence in fused[:k]:
            if counts is not None:  # the same terms as _coverage, read from the index's postings
                evidence.coverage = counts[keyword.position[evidence.chunk_id]] / len(query_terms)
            else:
                evidence.coverage = _coverage(query_terms, evidence.chunk)
        if judge_vector is not None and fused:
            self._rejudge(kb, snapshot, fused[:k], judge_vector)
        timings["fuse"] = round(timings.get("fuse", 0.0) + _ms(t), 2)
        timings["total"] = _ms(started)
        return SearchResult(kb, query, fused[:k], timings)

    def _rejudge(self, kb: str, snapshot: _Snapshot | None, evidence: list[Evidence], vector: np.ndarray) -> None:
        vector = np.asarray(vector, dtype=np.float32)
        if snapshot is not None:
            for e in evidence:
                e.cosine = float(snapshot.vectors[snapshot.index.position[e.chunk_id]] @ vector)
            return
        vectors = {c.chunk_id: v for c, v in self.store.get_chunks_with_vectors(kb, [e.chunk_id for e in evidence])}
        for e in evidence:
            e.cosine = float(np.dot(vectors[e.chunk_id], vector)) if e.chunk_id in vectors else -1.0

    # --- in-memory path ------------------------------------------------------------------------

    def _snapshot(self, kb: str, keyword: KeywordIndex) -> _Snapshot | None:
        cached = self._snapshots.get(kb)
        if cached is not None and cached.index is keyword:
            return cached
        if not keyword.chunk_ids or len(keyword.chunk_ids) > SNAPSHOT_MAX_CHUNKS:
            return None
        with self._lock:
            cached = self._snapshots.get(kb)
            if cached is not None and cached.index is keyword:
                return cached
            collection = self.store.require_kb(kb).collection  # a reindex switches it: vectors of another model
            if (
                cached is not None
                and cached.index.lineage == keyword.lineage
                and self._collections.get(kb) == collection
                and len(cached.present) <= len(keyword.chunk_ids)
            ):
                snapshot = self._extend_snapshot(kb, cached, keyword)
            else:
                snapshot = self._load_snapshot(kb, keyword)
            self._snapshots[kb] = snapshot
            self._collections[kb] = collection
            return snapshot

    def _fetch_vectors(self, kb: str, ids: list[str]) -> tuple[list[str], np.ndarray | None]:
        """(ids found, their vectors as one array) from the collection, in batches; no texts."""
        collection = self.store.collection(kb)
        found: list[str] = []
        vectors: list[np.ndarray] = []
        for start in range(0, len(ids), 5000):
            part = ids[start : start + 5000]
            with self.store.chroma_errors():
                result = collection.get(ids=part, include=["embeddings"])
            found += result["ids"]
            vectors.append(np.asarray(result["embeddings"], dtype=np.float32).reshape(len(result["ids"]), -1))
        rows = [v for v in vectors if len(v)]
        return found, (np.concatenate(rows) if rows else None)

    def _place(self, kb: str, keyword: KeywordIndex, ids: list[str], offset: int, dimension: int | None):
        """Vectors for `ids` (positions from `offset` on) and which were found."""
        found, rows = self._fetch_vectors(kb, ids)
        if dimension is None:
            dimension = rows.shape[1] if rows is not None else 1
        size = len(keyword.chunk_ids) - offset
        vectors = np.zeros((size, dimension), dtype=np.float32)
        present = np.zeros(size, dtype=bool)
        if rows is not None:
            at = np.fromiter((keyword.position[c] - offset for c in found), dtype=np.int64, count=len(found))
            vectors[at] = rows
            present[at] = True
        return vectors, present

    def _extend_snapshot(self, kb: str, old: _Snapshot, keyword: KeywordIndex) -> _Snapshot:
        """The snapshot of an index derived from `old`'s (the same base positions): only the appended chunks
        are read from the collection; tombstoned ones stop being present."""
        start = len(old.present)
        ids = [c for c in keyword.chunk_ids[start:] if c in keyword.position]
        vectors, present = self._place(kb, keyword, ids, start, old.vectors.shape[1])
        all_present = np.concatenate([old.present, present])
        removed = keyword.removed_mask()
        if removed is not None:
            all_present &= ~removed
        all_vectors = np.concatenate([old.vectors, vectors]) if len(vectors) else old.vectors
        documents, owner = old.documents, keyword.all_chunk_documents()
        if documents is not None and owner is not None and len(vectors):
            new_owner = owner[start:]
            first = documents.shape[0]
            # appended documents are wholly in the delta
            extra = _sum_rows_by_owner(vectors, new_owner - first, int(new_owner.max()) + 1 - first)
            extra /= np.maximum(np.linalg.norm(extra, axis=1, keepdims=True), 1e-12)
            documents = np.concatenate([documents, extra])
        return _Snapshot(keyword, all_vectors, all_present, documents, owner)

    def prefetch_texts(self, kb: str, max_chunks: int = CHUNK_CACHE) -> int:
        """Read the texts of all the KB's live chunks into its snapshot now, if it has at most `max_chunks`
        (an answering process does at warm-up: each text it would read later is a round trip through the
        serving process). The number read."""
        keyword = self.store.keyword_index(kb)
        snapshot = self._snapshot(kb, keyword)
        if snapshot is None or len(keyword.chunk_ids) > max_chunks:
            return 0
        positions = [keyword.position[c] for c in keyword.live_chunk_ids()]
        for start in range(0, len(positions), LIVE_PAGE):
            self._chunks_at(kb, snapshot, positions[start : start + LIVE_PAGE])
        return len(positions)

    def _chunks_at(self, kb: str, snap: _Snapshot, positions: list[int]) -> dict[int, StoredChunk]:
        """The chunks at these positions, from the snapshot's cache or the collection (absent ones left out)."""
        found = {i: c for i in positions if (c := snap.chunks.get(i)) is not None}
        missing = [i for i in positions if i not in found]
        if missing:
            ids = [snap.index.chunk_ids[i] for i in missing]
            with self.store.chroma_errors():
                result = self.store.collection(kb).get(ids=ids, include=["documents", "metadatas"])
            for cid, text, meta in zip(result["ids"], result["documents"], result["metadatas"], strict=True):
                found[snap.index.position[cid]] = chunk_from_metadata(cid, text, meta)
            if len(snap.chunks) > CHUNK_CACHE:  # other threads may read it meanwhile: replaced, never emptied
                snap.chunks = {}
            snap.chunks.update((i, found[i]) for i in missing if i in found)
        return found

    def _load_snapshot(self, kb: str, keyword: KeywordIndex) -> _Snapshot:
        saved = self._saved_snapshot(kb, keyword)
        if saved is not None:
            behind = len(keyword.chunk_ids) - len(saved.present)
            snapshot = self._extend_snapshot(kb, saved, keyword) if behind else saved
            if behind > SAVE_AFTER_CHUNKS:
                self._save_snapshot(kb, snapshot)
            return snapshot
        # tombstoned positions stay absent
        vectors, present = self._place(kb, keyword, keyword.live_chunk_ids(), 0, None)
        snapshot = self._assemble(keyword, vectors, present)
        self._save_snapshot(kb, snapshot)
        return snapshot

    # The vectors are saved beside the keyword index, named by its lineage (the same positions) and by the
    # collection they were read from (a reindex switches collections): a fresh process reads one file
    # instead of every vector from Chroma (docs/benchmarks.md, Scale).

    def _snapshot_file(self, kb: str, keyword: KeywordIndex) -> Path:
        collection = self.store.require_kb(kb).collection
        return self.store.keyword_dir(kb) / f"vectors-{keyword.lineage}-{collection}.npz"

    def _saved_snapshot(self, kb: str, keyword: KeywordIndex) -> _Snapshot | None:
        try:
            path = self._snapshot_file(kb, keyword)
            if not path.is_file():
                return None
            with np.load(path) as saved:
                vectors, present = saved["vectors"], saved["present"].astype(bool)
            if vectors.shape[0] != present.shape[0] or present.shape[0] > len(keyword.chunk_ids):
                return None
        except Exception as exc:  # a torn or foreign file: read from Chroma instead
            log.warning("saved vectors of %s not used: %s", kb, exc)
            return None
        removed = keyword.removed_mask()
        if removed is not None:
            present &= ~removed[: len(present)]
        owner = keyword.all_chunk_documents()
        return self._assemble_documents(keyword, vectors, present, owner[: len(present)] if owner is not None else None)

    def _save_snapshot(self, kb: str, snapshot: _Snapshot) -> None:
        try:
            path = self._snapshot_file(kb, snapshot.index)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            with tmp.open("wb") as handle:
                np.savez(handle, vectors=snapshot.vectors, present=snapshot.present)
            os.replace(tmp, path)
            for old in path.parent.glob("vectors-*.npz"):
                if old != path:
                    old.unlink(missing_ok=True)
        except OSError as exc:  # only the next cold start pays for it
            log.warning("vectors of %s not saved: %s", kb, exc)

    def _assemble(self, keyword: KeywordIndex, vectors: np.ndarray, present: np.ndarray) -> _Snapshot:
        return self._assemble_documents(keyword, vectors, present, keyword.all_chunk_documents())

    @staticmethod
    def _assemble_documents(
        keyword: KeywordIndex, vectors: np.ndarray, present: np.ndarray, owner: np.ndarray | None
    ) -> _Snapshot:
        documents = None
        if owner is not None and len(owner):
            documents = _sum_rows_by_owner(vectors, owner, int(owner.max()) + 1)
            documents /= np.maximum(np.linalg.norm(documents, axis=1, keepdims=True), 1e-12)
        return _Snapshot(keyword, vectors, present, documents, owner)

    def _search_snapshot(
        self,
        kb: str,
        snap: _Snapshot,
        query_vector: np.ndarray,
        bm25_all: np.ndarray | None,
        n: int,
        k: int,
        timings: dict[str, float],
    ) -> list[Evidence]:
        """The top k fused candidates (their chunks read only for those k)."""
        t = time.perf_counter()
        query_vector = np.asarray(query_vector, dtype=np.float32)
        if query_vector.shape[0] != snap.vectors.shape[1]:
            raise EmbeddingModelMismatch(
                f"the query vector is {query_vector.shape[0]}-d but the knowledge base holds "
                f"{snap.vectors.shape[1]}-d vectors; run `kbbot kb reindex` or switch the embedding settings back"
            )
        # einsum, not BLAS: a matrix-vector product this size gains nothing from BLAS threads, and on a
        # busy machine they wait for each other (docs/benchmarks.md).
        cosine = np.einsum("ij,j->i", snap.vectors, query_vector)
        cosine[~snap.present] = -2.0
        dense = cosine
        lam = self.config.document_dense_weight
        if lam and snap.documents is not None and snap.owner is not None:
            document_cosine = np.einsum("ij,j->i", snap.documents, query_vector)
            dense = (cosine + lam * document_cosine[snap.owner]) / (1 + lam)
            dense[~snap.present] = -2.0
        n = min(n, len(cosine))
        candidates = set(_top(dense, n).tolist())
        timings["dense"] = _ms(t)
        t = time.perf_counter()
        bm25 = bm25_all if bm25_all is not None else np.zeros(len(cosine), dtype=np.float32)
        if bm25_all is not None:
            candidates.update(i for i in _top(bm25, n).tolist() if bm25[i] > 0)
        picked = np.fromiter((i for i in candidates if snap.present[i]), dtype=np.int64)
        if picked.size == 0:
            timings["fuse"] = _ms(t)
            return []
        if self.config.rrf_k > 0:
            scores = _rrf(dense[picked], bm25[picked], self.config.rrf_k)
        else:
            top_bm25 = float(bm25[picked].max()) or 1.0
            w = self.config.dense_weight
            scores = w * dense[picked] + (1 - w) * (bm25[picked] / top_bm25)
        order = np.argsort(-scores, kind="stable")[:k]
        chunks = self._chunks_at(kb, snap, [int(picked[j]) for j in order])
        fused = [
            Evidence(chunks[int(picked[j])], float(scores[j]), float(cosine[picked[j]]), float(bm25[picked[j]]))
            for j in order
            if int(picked[j]) in chunks  # a chunk deleted since the snapshot was taken is left out
        ]
        timings["fuse"] = _ms(t)
        return fused

    # --- Chroma path (very large KBs) ----------------------------------------------------------

    def _search_chroma(
        self,
        kb: str,
        query_vector: np.ndarray,
        keyword: KeywordIndex,
        bm25_all: np.ndarray | None,
        n: int,
        timings: dict[str, float],
    ) -> list[Evidence]:
        t = time.perf_counter()
        dense_hits = self.store.dense_search(kb, query_vector, n)
        timings["dense"] = _ms(t)
        t = time.perf_counter()
        keyword_hits = keyword.top(bm25_all, n) if bm25_all is not None else []
        candidates: dict[str, Evidence] = {}
        for chunk, cosine in dense_hits:
            pos = keyword.position.get(chunk.chunk_id)
            bm25 = float(bm25_all[pos]) if bm25_all is not None and pos is not None else 0.0
            candidates[chunk.chunk_id] = Evidence(chunk, 0.0, cosine, bm25)
        missing = [cid for cid, _ in keyword_hits if cid not in candidates]
        if missing:
            for chunk, vector in self.store.get_chunks_with_vectors(kb, missing):
                bm25 = float(bm25_all[keyword.position[chunk.chunk_id]])  # type: ignore[index]
                candidates[chunk.chunk_id] = Evidence(chunk, 0.0, float(np.dot(vector, query_vector)), bm25)
        evidence = list(candidates.values())
        if not evidence:
            timings["fuse"] = _ms(t)
            return []
        dense = np.array([e.cosine for e in evidence], dtype=np.float32)
        bm25 = np.array([e.bm25 for e in evidence], dtype=np.float32)
        if self.config.rrf_k > 0:
            scores = _rrf(dense, bm25, self.config.rrf_k)
        else:
            w = self.config.dense_weight
            scores = w * dense + (1 - w) * (bm25 / (float(bm25.max()) or 1.0))
        for e, s in zip(evidence, scores, strict=True):
            e.score = float(s)
        timings["fuse"] = _ms(t)
        return sorted(evidence, key=lambda e: e.score, reverse=True)


def _top(values: np.ndarray, n: int) -> np.ndarray:
    if n >= len(values):
        return np.argsort(-values)
    top = np.argpartition(-values, n - 1)[:n]
    return top[np.argsort(-values[top])]


def _rrf(dense: np.ndarray, bm25: np.ndarray, k: int) -> np.ndarray:
    scores = np.zeros(len(dense), dtype=np.float64)
    for values in (dense, bm25):
        ranks = np.empty(len(values), dtype=np.int64)
        ranks[np.argsort(-values, kind="stable")] = np.arange(len(values))
        scores += 1.0 / (k + ranks + 1)
    return scores


def _coverage(query_terms: set[str], chunk: StoredChunk) -> float:
    if not query_terms:
        return 0.0
    chunk_terms = joined_terms(chunk.header, chunk.text)
    return len(query_terms & chunk_terms) / len(query_terms)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)
