"""all-MiniLM-L6-v2 on OpenVINO's CPU plugin: the ONNX runtime's verified float32 export, computed in bfloat16
where the CPU has bfloat16 arithmetic (AVX-512 BF16, AMX), else in float32. That is the bulk (ingest) encode;
queries and short encodes stay on ONNX Runtime in float32.

Tokenising, batching, pooling and the span vectors are tools.onnx_minilm's; only the forward pass differs
(see _encode).
bfloat16 moves the vectors by about 1e-5 in cosine (docs/benchmarks.md, "Session 17, OpenVINO"): they are
interchangeable with torch's and float32 ONNX's, so the collection identity is the same. Caches key on the bulk
precision too (`vector_source`), so a benchmark built with bfloat16 documents never replays float32 ones as its own
(short encodes under that key are ONNX Runtime's float32, as every query is).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from tools.embeddings import MINILM_SHA256, EmbeddingError, LocalMiniLM
from tools.onnx_minilm import OnnxMiniLM

log = logging.getLogger(__name__)

RUNTIME = "openvino"
# Texts from which an encode runs on OpenVINO: four of its batches (tools.onnx_minilm.BATCH_SIZES).
BULK_TEXTS = 64


def import_openvino():
    """`import openvino`, without its model-conversion tools: importing those sends a usage event to Google
    Analytics and writes a client id under ~/intel. kbbot converts nothing and must not reach the network;
    openvino's own __init__ goes on without them (it catches their ImportError)."""
    sys.modules.setdefault("openvino.tools.ovc", None)
    import openvino

    return openvino


class _InferSession:
    """onnxruntime's `session.run(None, feeds)` over a compiled OpenVINO model, one inference at a time: two Python
    threads running infer requests of one compiled model at once were seen to deadlock inside openvino's input
    dispatch (docs/benchmarks.md), and a one-stream model runs one request at a time anyway."""

    def __init__(self, compiled):
        self._compiled = compiled
        self._request = compiled.create_infer_request()
        self._lock = threading.Lock()

    def run(self, _outputs, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        with self._lock:
            result = self._request.infer(dict(feeds))  # copies the output: the next inference reuses the buffer
            return [result[self._compiled.output(0)]]


class OpenVinoMiniLM(OnnxMiniLM):
    """The Embedder protocol for MiniLM on OpenVINO (`KBBOT_LOCAL_RUNTIME=openvino`)."""

    def __init__(
        self,
        cache_dir: Path,
        model_dir: Path | None = None,
        expected_sha256: str = MINILM_SHA256,
        model_name: str = LocalMiniLM.model_name,
    ):
        super().__init__(cache_dir, RUNTIME, model_dir, expected_sha256, model_name)
        try:
            self._core = import_openvino().Core()
            capabilities = self._core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
        except (ImportError, RuntimeError) as exc:
            raise EmbeddingError(
                f"OpenVINO cannot run on this machine ({exc}); set KBBOT_LOCAL_RUNTIME=onnx (the same vectors, "
                "no reindex needed)"
            ) from exc
        self.precision = "bf16" if "BF16" in capabilities else "f32"
        self.vector_source = f"{LocalMiniLM.model_name}@{RUNTIME}-{self.precision}"
        self._bulk: _InferSession | None = None
        self._bulk_failed = False
        # Its own lock: compiling takes a second or more, and queries must not wait for it on _sessions_lock.
        self._bulk_lock = threading.Lock()

    @staticmethod
    def export_of(runtime: str) -> str:
        return "onnx"

    def _encode(
        self,
        texts: Sequence[str],
        threads: int,
        unit_spans: Sequence[Sequence[tuple[int, int]]] | None = None,
        show_progress: bool = False,
        session=None,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Bulk encodes (BULK_TEXTS or more, on several cores) on OpenVINO; anything shorter — queries, a document
        of a few batches — in float32 on ONNX Runtime. A query's vector is then the same bits alone or batched with
        concurrent questions' (bfloat16's move a little with their batch mates' padding), so a question gets the
        same answer whoever else is asking; and reading the ONNX graph into OpenVINO, which briefly takes about twice
        the weights' memory, is paid only by an ingest big enough to gain from it, not by a serving process that
        publishes one document."""
        if session is None and threads > 1 and len(texts) >= BULK_TEXTS:
            session = self._bulk_session(threads)
        return super()._encode(texts, threads, unit_spans, show_progress, session)

    def _bulk_session(self, threads: int) -> _InferSession | None:
        """The compiled bulk model, or None (ONNX Runtime's float32 session then runs the encode) where OpenVINO
        cannot read or compile it: its frontends load only here, so a machine can pass the start-up check and fail
        now. ONNX Runtime computes the same verified export in float32 — vectors of the same identity — so the
        ingest goes on, slower, instead of failing every bulk encode."""
        with self._bulk_lock:
            if self._bulk is None and not self._bulk_failed:
                try:
                    compiled = self._core.compile_model(
                        self._core.read_model(self._model_bytes),
                        "CPU",
                        {
                            "INFERENCE_PRECISION_HINT": self.precision,
                            "INFERENCE_NUM_THREADS": threads,
                            "PERFORMANCE_HINT": "LATENCY",
                            # Threads pinned to cores fight the store's, the query encoder's and the neighbours'.
                            "ENABLE_CPU_PINNING": False,
                        },
                    )
                except RuntimeError as exc:
                    self._bulk_failed = True
                    log.warning(
                        "OpenVINO cannot compile the embedding model (%s); documents are encoded by ONNX Runtime "
                        "instead (the same vectors, slower). Set KBBOT_LOCAL_RUNTIME=onnx to skip this attempt.",
                        exc,
                    )
                    return None
                self._bulk = _InferSession(compiled)
            return self._bulk
