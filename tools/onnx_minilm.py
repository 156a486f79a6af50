"""all-MiniLM-L6-v2 on ONNX Runtime: the same model and pooling as sentence-transformers, without torch.

Tokenised by the `tokenizers` library from the model's own tokenizer.json (lower-casing, [CLS]/[SEP],
truncation at 256 tokens, texts stripped first, as sentence-transformers does), run by onnxruntime on
a locally exported, hash-verified copy of the pinned weights (tools/onnx_export.py), mean-pooled over
the attention mask and normalised. Nothing here imports torch, transformers or sentence-transformers.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from tools.embeddings import (
    MINILM_MAX_TOKENS,
    MINILM_SHA256,
    EmbeddingError,
    LocalMiniLM,
    cached_query_embedding,
    verified_model_dir,
)
from tools.onnx_export import INPUT_NAMES, RECIPES, OnnxExportError, verified_onnx_model
from tools.span_pooling import pool_spans

# Texts per forward pass; batches are cut from texts sorted by token count. float32: as LocalMiniLM's encode()
# (its vectors are the same bits at any batch size). int8: one text per run, because dynamic quantisation scales
# each MatMul's activations by one factor per tensor, i.e. over the whole batch, so in a batch a text's vector
# would depend on which other texts (and how much padding) share it; alone, the scale is its own text's.
# openvino: 16-text batches, which its CPU plugin runs faster per text than 64 (docs/benchmarks.md).
BATCH_SIZES = {"onnx": 64, "onnx-int8": 1, "openvino": 16}
# Part of int8's vector source: its vectors depend on how texts are run as well as on the recipe.
INT8_ENCODING = "one-text-per-run"


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _feeds(batch: Sequence[int], encodings) -> dict[str, np.ndarray]:
    width = len(encodings[batch[0]].ids)
    feeds = {name: np.zeros((len(batch), width), dtype=np.int64) for name in INPUT_NAMES}
    for row, i in enumerate(batch):
        encoding = encodings[i]
        length = len(encoding.ids)
        feeds["input_ids"][row, :length] = encoding.ids
        feeds["attention_mask"][row, :length] = encoding.attention_mask
        feeds["token_type_ids"][row, :length] = encoding.type_ids
    return feeds


def _run_in_order(session, batches: Sequence[Sequence[int]], encodings, streams: int):
    """(batch, feeds, token embeddings) per batch, in `batches` order; with several streams, at most two batches
    per stream are in flight, so memory stays a few batches' token embeddings."""

    def run(batch):
        feeds = _feeds(batch, encodings)
        (token_embeddings,) = session.run(None, feeds)
        return batch, feeds, token_embeddings

    if streams == 1:
        yield from map(run, batches)
        return
    with ThreadPoolExecutor(max_workers=streams, thread_name_prefix="onnx-encode") as pool:
        pending: deque = deque()
        for batch in batches:
            pending.append(pool.submit(run, batch))
            if len(pending) >= 2 * streams:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


class OnnxMiniLM:
    """The Embedder protocol for MiniLM on ONNX Runtime (`runtime` "onnx" = float32, "onnx-int8" = int8 weights);
    tools.openvino_minilm runs the same float32 export on OpenVINO."""

    dimension = LocalMiniLM.dimension
    max_tokens = MINILM_MAX_TOKENS

    def __init__(
        self,
        cache_dir: Path,
        runtime: str = "onnx",
        model_dir: Path | None = None,
        expected_sha256: str = MINILM_SHA256,
        model_name: str = LocalMiniLM.model_name,
    ):
        from tokenizers import Tokenizer

        model_dir = verified_model_dir(model_dir, expected_sha256)
        try:
            self._model_bytes = verified_onnx_model(cache_dir, model_dir, expected_sha256, self.export_of(runtime))
        except OnnxExportError as exc:
            raise EmbeddingError(str(exc)) from exc
        self.runtime = runtime
        self.model_name = model_name
        self._batch_size = BATCH_SIZES[runtime]
        # What computed the vectors, for caches: int8's vectors move with its recipe and with how texts are run,
        # float32's do not (the fused and unfused graphs agree to the 7th decimal, docs/benchmarks.md), so only
        # int8's key names them.
        self.vector_source = f"{LocalMiniLM.model_name}@{runtime}"
        if runtime == "onnx-int8":
            self.vector_source += f"#{RECIPES[runtime]}#{INT8_ENCODING}"
        # One tokenizer that truncates as the model does, one that counts every token of a text.
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()  # tokenizer.json pads to 128; batches are padded here to their longest
        self._tokenizer.enable_truncation(MINILM_MAX_TOKENS)
        self._counter = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._counter.no_padding()
        self._counter.no_truncation()
        self._sessions: dict[tuple[int, int], object] = {}
        self._sessions_lock = threading.Lock()

    @staticmethod
    def export_of(runtime: str) -> str:
        """Which verified export (tools.onnx_export) the runtime runs."""
        return runtime

    def _streams(self, threads: int, batches: int) -> int:
        """How many batches run side by side: one per thread for one-text passes (int8's), when each thread has a few
        to do. float32's 64-text batches keep two intra-op threads busy already (side by side measured no faster)."""
        return threads if self._batch_size == 1 and threads > 1 and batches >= 4 * threads else 1

    def _session(self, threads: int, streams: int = 1):
        """One inference session per intra-op thread count and number of batches run side by side, made on first
        use."""
        with self._sessions_lock:
            if (threads, streams) not in self._sessions:
                self._sessions[threads, streams] = self._new_session(threads, streams)
            return self._sessions[threads, streams]

    def _new_session(self, threads: int, streams: int):
        # One session serves every stream: its run() is thread-safe.
        return self._ort.InferenceSession(
            self._model_bytes, sess_options=self._session_options(threads), providers=["CPUExecutionProvider"]
        )

    def _session_options(self, threads: int):
        options = self._ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        return options

    @property
    def _ort(self):
        import onnxruntime

        return onnxruntime

    def _encode(
        self,
        texts: Sequence[str],
        threads: int,
        unit_spans: Sequence[Sequence[tuple[int, int]]] | None = None,
        show_progress: bool = False,
        session=None,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each text's vector (rows in `texts` order) and, when spans are given, its span vectors (by `session`
        when given, else by the runtime's session for `threads`).

        Spans are pooled batch by batch, so only one batch's token embeddings are ever held."""
        stripped = [t.strip() for t in texts]
        encodings = self._tokenizer.encode_batch(stripped)
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        units: list[np.ndarray] = [np.empty((0, self.dimension), dtype=np.float32)] * len(texts)
        # Longest first, cut into batches: each batch pads to its own longest text, so little padding.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids), reverse=True)
        batches = [order[first : first + self._batch_size] for first in range(0, len(order), self._batch_size)]
        streams = self._streams(threads, len(batches))
        # A one-text forward pass keeps a second intra-op thread mostly waiting; two passes side by side, each on
        # a one-thread session, do not.
        session = session or self._session(1 if streams > 1 else threads, streams)
        results = _run_in_order(session, batches, encodings, streams)
        if show_progress:
            from tqdm import tqdm

            results = tqdm(results, total=len(batches), unit="batch", desc="embedding", leave=False)
        for batch, feeds, token_embeddings in results:
            mask = feeds["attention_mask"][:, :, None].astype(np.float32)
            pooled = (token_embeddings * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            for row, i in enumerate(batch):
                vectors[i] = pooled[row]
                if unit_spans is not None:
                    # The offsets of this very tokenisation (into the stripped text, hence the shift).
                    shift = len(texts[i]) - len(texts[i].lstrip())
                    offsets = np.asarray(encodings[i].offsets, dtype=np.int64).reshape(-1, 2) + shift
                    units[i] = pool_spans(offsets, unit_spans[i], token_embeddings[row])
        return vectors, units

    def embed_documents(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._encode(texts, _cpu_count(), show_progress=show_progress)[0]

    def embed_documents_with_units(
        self, texts: Sequence[str], unit_spans: Sequence[Sequence[tuple[int, int]]], show_progress: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """As LocalMiniLM's: span vectors pooled from the same pass, with the offsets of the same tokenisation."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32), []
        return self._encode(texts, _cpu_count(), unit_spans=unit_spans, show_progress=show_progress)

    def embed_query(self, text: str) -> np.ndarray:
        return cached_query_embedding(self, text)

    def _encode_one(self, text: str) -> np.ndarray:
        return self.encode_queries([text])[0]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        # Short texts gain next to nothing from a second intra-op thread, and on a busy machine the threads
        # wait for each other: queries (concurrent questions' as one batch, tools/query_batching.py) run on
        # their own one-thread session.
        return self._encode(texts, threads=1)[0]

    def tokenize(self, text: str) -> list:
        return self._counter.encode(text, add_special_tokens=False).tokens
