"""One encoder for the query texts of concurrent questions: their encodes go out as one batch.

Fifty people asking at once used to mean fifty single-text forward passes, one after the other under a
process-wide lock. A forward pass over a batch of short texts costs little more than over one, so callers
hand their text to a `QueryBatcher` and block on a future; its one thread takes everything waiting (up to
`max_batch`), after giving a lone text a few milliseconds' company, encodes it in one call and hands each
caller its row. A failed batch raises in every caller waiting on it: nobody hangs, nothing is dropped.

`BatchingEmbedder` puts it behind any embedder's `embed_query`, with the LRU query cache in front, so a
question asked again never waits for a batch. Everything else is the wrapped embedder's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import numpy as np

log = logging.getLogger(__name__)

MAX_BATCH = 16  # past this a batch costs about as much per text as two batches (docs/benchmarks.md)
WINDOW_S = 0.003  # how long a lone text waits for company: well below one encode
CACHE_SIZE = 2048


class QueryBatcherClosed(RuntimeError):
    """The batcher was closed; nothing more is encoded."""


class QueryBatcher:
    """Encode texts from many threads in shared batches; `embed(text)` blocks until its vector is ready."""

    def __init__(
        self,
        encode_batch: Callable[[list[str]], np.ndarray],
        max_batch: int = MAX_BATCH,
        window_s: float = WINDOW_S,
        name: str = "kbbot-query-encoder",
    ):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._encode_batch = encode_batch
        self.max_batch = max_batch
        self.window_s = window_s
        self._name = name
        self._waiting: OrderedDict[str, list[Future]] = OrderedDict()  # text → its callers, in arrival order
        self._in_flight: dict[str, list[Future]] = {}  # texts being encoded now → their callers
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._closed = False
        self._thread: threading.Thread | None = None
        self.batches = 0  # encoded so far (for tests and measurements)
        self.texts = 0

    def embed(self, text: str) -> np.ndarray:
        return self.submit(text).result()

    def submit(self, text: str) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise QueryBatcherClosed("the query encoder is closed")
            if text in self._in_flight:  # the same text twice is encoded once, even mid-encode
                self._in_flight[text].append(future)
                return future
            self._waiting.setdefault(text, []).append(future)
            self._start_locked()
            self._arrived.notify()
        return future

    def close(self) -> None:
        """Encode what is waiting, then stop the thread."""
        with self._lock:
            self._closed = True
            self._arrived.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _start_locked(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._encode(batch)

    def _next_batch(self) -> list[tuple[str, list[Future]]] | None:
        with self._lock:
            while not self._waiting:
                if self._closed:
                    return None
                self._arrived.wait()
            # A lone text waits a moment for others; texts that queued up during the last encode go at once.
            deadline = time.monotonic() + self.window_s
            while len(self._waiting) < self.max_batch and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._arrived.wait(left)
            batch = []
            while self._waiting and len(batch) < self.max_batch:
                text, futures = self._waiting.popitem(last=False)
                self._in_flight[text] = futures  # the same list: callers arriving now join it
                batch.append((text, futures))
            return batch

    def _encode(self, batch: list[tuple[str, list[Future]]]) -> None:
        texts = [text for text, _ in batch]
        try:
            vectors = np.asarray(self._encode_batch(texts), dtype=np.float32)
            if vectors.ndim != 2 or len(vectors) != len(texts):
                raise RuntimeError(f"the encoder returned {vectors.shape} for {len(texts)} texts")
        except BaseException as exc:  # every caller of this batch gets the error; the thread lives on
            log.warning("query batch of %d failed: %s", len(texts), type(exc).__name__)
            self._land(texts)
            for _, futures in batch:
                for future in futures:
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.batches += 1
        self.texts += len(texts)
        self._land(texts)
        for row, (_, futures) in zip(vectors, batch, strict=True):
            row.setflags(write=False)
            for future in futures:
                future.set_result(row)

    def _land(self, texts: Sequence[str]) -> None:
        """The batch's texts are no longer in flight: from here on their callers' lists are final."""
        with self._lock:
            for text in texts:
                self._in_flight.pop(text, None)


class QueryCache:
    """A thread-safe LRU of query vectors (read-only arrays: callers share them)."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
            return vector

    def put(self, text: str, vector: np.ndarray) -> None:
        with self._lock:
            self._vectors[text] = vector
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()


class BatchingEmbedder:
    """An embedder whose `embed_query` is cached, then batched with the concurrent questions' queries.

    `encode_batch` defaults to the wrapped embedder's `encode_queries` (the local model's query path: one
    torch thread) or else its `embed_documents`. Every other attribute is the wrapped embedder's.
    """

    def __init__(
        self,
        inner,
        encode_batch: Callable[[list[str]], np.ndarray] | None = None,
        max_batch: int = MAX_BATCH,
        window_s: float = WINDOW_S,
        cache_size: int = CACHE_SIZE,
    ):
        self.inner = inner
        encode = encode_batch or getattr(inner, "encode_queries", None) or inner.embed_documents
        self.batcher = QueryBatcher(encode, max_batch=max_batch, window_s=window_s)
        self.cache = QueryCache(cache_size)

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_query(self, text: str) -> np.ndarray:
        vector = self.cache.get(text)
        if vector is None:
            vector = self.batcher.embed(text)
            self.cache.put(text, vector)
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several query texts at once (cached ones from the cache); rows in `texts` order."""
        found = {t: v for t in dict.fromkeys(texts) if (v := self.cache.get(t)) is not None}
        futures = {t: self.batcher.submit(t) for t in dict.fromkeys(texts) if t not in found}
        for text, future in futures.items():
            found[text] = future.result()
            self.cache.put(text, found[text])
        return np.stack([found[t] for t in texts]) if texts else np.zeros((0, self.dimension), dtype=np.float32)

    def embed_documents(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        return self.inner.embed_documents(texts, show_progress=show_progress)

    def tokenize(self, text: str) -> list:
        return self.inner.tokenize(text)

    def clear_cache(self) -> None:
        self.cache.clear()

    def __getattr__(self, name: str):
        # only reached for what this class does not define: the wrapped embedder's extras
        # (embed_documents_with_units, _model, …)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
