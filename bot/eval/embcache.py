"""An embedding cache for benchmark corpora, keyed by model and runtime + text hash (sqlite under the eval dir).

It wraps the configured embedder for ingest and baselines only, so reruns of a benchmark do not
re-encode an unchanged corpus. Every figure that used it says so (hits/misses are counted).
Query embeddings are never cached here: query latency always includes encoding the query.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np


class EmbeddingCache:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self._lock = threading.Lock()

    @staticmethod
    def key(model: str, text: str) -> str:
        return hashlib.sha256(f"{model}\n{text}".encode()).hexdigest()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = list(keys[start : start + 500])
                rows = self._db.execute(
                    f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(part))})", part
                ).fetchall()
                found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        return found

    def put_many(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)",
                [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items],
            )


class CachingEmbedder:
    """The Embedder protocol over another embedder, with document embeddings served from the cache."""

    def __init__(self, inner, cache: EmbeddingCache | None, also_read: str | None = None):
        self.inner = inner
        self.cache = cache
        self.model_name = inner.model_name
        self.dimension = inner.dimension
        # Keyed on what computed the vectors (model and runtime), not the collection identity: float32 ONNX
        # shares torch's identity, yet a benchmark of it must embed with it, not replay torch's vectors.
        self.vector_source = getattr(inner, "vector_source", inner.model_name)
        # Another source whose cached vectors may stand in (read only; what is computed is stored under
        # vector_source): for a benchmark that needs real vectors of the collection's identity, not of
        # this runtime (`kbbot eval scale`).
        self.also_read = also_read if also_read != self.vector_source else None
        self.hits = 0
        self.misses = 0

    def _through_cache(
        self,
        keys: list[str],
        compute: Callable[[list[int]], Sequence[np.ndarray]],
        fallback_keys: list[str] | None = None,
    ) -> list[np.ndarray]:
        """The cached array of every key (or of its fallback key); `compute(missing positions)` makes the
        others, which are cached under their key."""
        found = self.cache.get_many(keys)  # type: ignore[union-attr]
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing and fallback_keys is not None:
            stand_ins = self.cache.get_many([fallback_keys[i] for i in missing])  # type: ignore[union-attr]
            found.update((keys[i], stand_ins[fallback_keys[i]]) for i in missing if fallback_keys[i] in stand_ins)
            missing = [i for i in missing if keys[i] not in found]
        if missing:
            rows = [(keys[i], v) for i, v in zip(missing, compute(missing), strict=True)]
            self.cache.put_many(rows)  # type: ignore[union-attr]
            found.update(rows)
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        return [np.asarray(found[k], dtype=np.float32) for k in keys]

    def embed_documents(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if self.cache is None:
            self.misses += len(texts)
            return self.inner.embed_documents(texts, show_progress=show_progress)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        keys = [EmbeddingCache.key(self.vector_source, t) for t in texts]
        fallback = [EmbeddingCache.key(self.also_read, t) for t in texts] if self.also_read else None
        return np.stack(
            self._through_cache(
                keys,
                lambda missing: self.inner.embed_documents([texts[i] for i in missing], show_progress=show_progress),
                fallback,
            )
        )

    def embed_documents_with_units(
        self, texts: Sequence[str], unit_spans: Sequence[Sequence[tuple[int, int]]], show_progress: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """As the inner embedder's; one cache entry per text + spans holds the text's vector, then its units'."""
        if self.cache is None:
            self.misses += len(texts)
            return self.inner.embed_documents_with_units(texts, unit_spans, show_progress=show_progress)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32), []

        def compute(missing: list[int]) -> list[np.ndarray]:
            vectors, units = self.inner.embed_documents_with_units(
                [texts[i] for i in missing], [unit_spans[i] for i in missing], show_progress=show_progress
            )
            return [np.vstack([v[None, :], u]) for v, u in zip(vectors, units, strict=True)]

        keyed = [f"{s}\n{t}" for t, s in zip(texts, unit_spans, strict=True)]
        keys = [EmbeddingCache.key(f"{self.vector_source}#units", k) for k in keyed]
        fallback = [EmbeddingCache.key(f"{self.also_read}#units", k) for k in keyed] if self.also_read else None
        stacked = [row.reshape(-1, self.dimension) for row in self._through_cache(keys, compute, fallback)]
        return np.stack([s[0] for s in stacked]), [s[1:] for s in stacked]

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def tokenize(self, text: str) -> list:
        return self.inner.tokenize(text)

    def counters(self) -> tuple[int, int]:
        return self.hits, self.misses


def clear_query_cache() -> None:
    """Forget cached query embeddings, so each system's latency pays for encoding its queries."""
    from bot.core import KnowledgeBot

    KnowledgeBot.forget_query_vectors()
