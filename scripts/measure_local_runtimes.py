"""The local MiniLM's runtimes side by side: are their vectors torch's, and how fast is each.

    .venv/bin/python scripts/measure_local_runtimes.py [--docs 600] [--rounds 2] [--queries 200] [--json]
        [--unfused-dir DIR] [--session-variants nospin,parallel,basic] [--speed-texts N]

Real chunk texts: the first N SciFact abstracts cut as kbbot cuts them (180-token windows, 24 overlap,
"title\\nchunk" as embedded). Each variant embeds the same texts; the cosine of each row to torch's row
is reported (min, p1, mean). Speed is a bare `embed_documents` of the same texts, the variants
interleaved (torch, onnx, onnx-int8, ..., torch, ...) so a change of machine load hits them alike, with
each round's speed relative to that round's torch; and single query encodes (one text at a time,
`_encode_one`, the query path) of SciFact queries, interleaved too.

Variants: `openvino` runs the float32 export on OpenVINO (bfloat16 where the CPU has it; its single-query
encodes are onnx's, by design). `onnx` and `onnx-int8` are today's exports (fused graph, tools/onnx_export.py) from
--model-cache. `--unfused-dir` adds `onnx-unfused` / `onnx-int8-unfused`: the session-6 recipe's
model.onnx / model-int8.onnx copied from an older cache (each checked against its own manifest's
sha256). `--session-variants` adds the fused float32 graph under other session options: `nospin`
(intra-op threads do not spin-wait), `parallel` (ORT_PARALLEL execution), `basic` (graph optimisation
level ORT_ENABLE_BASIC instead of the default ORT_ENABLE_ALL), `threads1` (one intra-op thread).
int8's dynamic quantisation scales activations per batch, so the same text embedded alone and in a
batch differ a little: `int8_alone_vs_batch` is that cosine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DATASET = REPO.parent / "shared" / "datasets" / "scifact"
SESSION_VARIANTS = ("nospin", "parallel", "basic", "threads1")


def chunk_texts(limit: int, tokenize) -> list[str]:
    from llama_index.core.node_parser import SentenceSplitter

    from bot.eval.datasets import load_beir
    from tools.chunking import CHUNK_OVERLAP_TOKENS, CHUNK_TOKENS

    corpus = load_beir(DATASET).corpus
    splitter = SentenceSplitter(chunk_size=CHUNK_TOKENS, chunk_overlap=CHUNK_OVERLAP_TOKENS, tokenizer=tokenize)
    texts = []
    for title, text in list(corpus.values())[:limit]:
        texts += [f"{title}\n{piece}" for piece in splitter.split_text(text) if piece.strip()]
    return texts


def verified_copy(model_file: Path) -> bytes:
    """An export's bytes when they hash as its own manifest records, and the manifest names the pinned weights."""
    from tools.embeddings import MINILM_SHA256
    from tools.onnx_export import manifest_path

    manifest = json.loads(manifest_path(model_file).read_text(encoding="utf-8"))
    data = model_file.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if manifest.get("source_sha256") != MINILM_SHA256 or manifest.get("file_sha256") != digest:
        raise SystemExit(f"{model_file} does not verify against its manifest")
    return data


def make_variant_class():
    from tools.onnx_minilm import OnnxMiniLM

    class Variant(OnnxMiniLM):
        """An ONNX runtime with other model bytes (a verified older export) or other session options."""

        def __init__(self, cache: Path, runtime: str, model_file: Path | None = None, session_variant: str = ""):
            super().__init__(cache, runtime)
            if model_file is not None:
                self._model_bytes = verified_copy(model_file)
            self.session_variant = session_variant

        def _session_options(self, threads: int):
            ort = self._ort
            if self.session_variant == "threads1":
                threads = 1
            options = super()._session_options(threads)
            if self.session_variant == "nospin":
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            elif self.session_variant == "parallel":
                options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
                options.inter_op_num_threads = threads
            elif self.session_variant == "basic":
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            return options

    return Variant


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=600, help="SciFact abstracts to chunk")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved timing rounds")
    parser.add_argument("--queries", type=int, default=200, help="single-query encodes per variant and round")
    parser.add_argument("--model-cache", type=Path, default=Path(tempfile.gettempdir()) / "kbbot-models")
    parser.add_argument("--unfused-dir", type=Path, help="a folder with the session-6 model.onnx, model-int8.onnx")
    parser.add_argument("--session-variants", default="", help=f"comma-separated, of {', '.join(SESSION_VARIANTS)}")
    parser.add_argument(
        "--speed-texts", type=int, default=0, help="time the first N texts only (0: all); cosines use all"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    session_variants = [v for v in args.session_variants.split(",") if v]
    if unknown := set(session_variants) - set(SESSION_VARIANTS):
        parser.error(f"unknown session variants: {', '.join(sorted(unknown))}")

    from bot.eval.datasets import load_beir
    from tools.embeddings import LocalMiniLM
    from tools.openvino_minilm import OpenVinoMiniLM

    variant = make_variant_class()
    started = time.perf_counter()
    embedders = {"torch": LocalMiniLM(), "onnx": variant(args.model_cache, "onnx")}
    embedders["onnx-int8"] = variant(args.model_cache, "onnx-int8")
    embedders["openvino"] = OpenVinoMiniLM(args.model_cache)
    if args.unfused_dir:
        embedders["onnx-unfused"] = variant(args.model_cache, "onnx", args.unfused_dir / "model.onnx")
        embedders["onnx-int8-unfused"] = variant(args.model_cache, "onnx-int8", args.unfused_dir / "model-int8.onnx")
    for name in session_variants:
        embedders[f"onnx+{name}"] = variant(args.model_cache, "onnx", session_variant=name)
    load_s = round(time.perf_counter() - started, 1)
    texts = chunk_texts(args.docs, embedders["onnx"].tokenize)
    queries = list(load_beir(DATASET).judged_queries().values())[: args.queries]
    for embedder in embedders.values():
        embedder.embed_documents(texts[:64])  # warm up
    # The session variants run the fused float32 graph: their vectors are onnx's, only their speed differs.
    vectors = {name: e.embed_documents(texts) for name, e in embedders.items() if "+" not in name}
    timed = texts[: args.speed_texts] if args.speed_texts else texts
    seconds: dict[str, list[float]] = {r: [] for r in embedders}
    query_ms: dict[str, list[float]] = {r: [] for r in embedders}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for name, embedder in embedders.items():
            begun = time.perf_counter()
            embedder.embed_documents(timed)
            seconds[name].append(time.perf_counter() - begun)
        if queries:
            for name, embedder in embedders.items():
                begun = time.perf_counter()
                for query in queries:
                    embedder._encode_one(query)
                query_ms[name].append((time.perf_counter() - begun) * 1000 / len(queries))
        loads.append(os.getloadavg()[0])
    result: dict = {
        "texts": len(texts),
        "timed_texts": len(timed),
        "docs": args.docs,
        "load_s_all_variants": load_s,
        "cpu_count": len(os.sched_getaffinity(0)),
        "loadavg_1min_per_round": [round(x, 1) for x in loads],
        "runtimes": {},
    }
    for name in embedders:
        cosines = (vectors[name.split("+")[0]] * vectors["torch"]).sum(axis=1)
        speedups = [torch_s / s for torch_s, s in zip(seconds["torch"], seconds[name], strict=True)]
        result["runtimes"][name] = {
            "cosine_to_torch": {
                "min": round(float(cosines.min()), 7),
                "p1": round(float(np.percentile(cosines, 1)), 7),
                "mean": round(float(cosines.mean()), 7),
            },
            "texts_per_s": [round(len(timed) / s, 1) for s in seconds[name]],
            "speed_vs_torch_per_round": [round(x, 2) for x in speedups],
            "query_ms": [round(ms, 2) for ms in query_ms[name]],
        }
    if "onnx-int8-unfused" in vectors:
        cosines = (vectors["onnx-int8"] * vectors["onnx-int8-unfused"]).sum(axis=1)
        result["int8_fused_vs_unfused"] = {
            "min": round(float(cosines.min()), 6),
            "mean": round(float(cosines.mean()), 6),
        }
    alone = np.stack([embedders["onnx-int8"]._encode_one(t) for t in texts[:200]])
    cosines = (alone * vectors["onnx-int8"][:200]).sum(axis=1)
    result["int8_alone_vs_batch"] = {"min": round(float(cosines.min()), 6), "mean": round(float(cosines.mean()), 6)}
    # bfloat16 document vectors move a little with their batch mates' padding (queries are float32: they do not).
    alone = np.concatenate([embedders["openvino"].embed_documents([t]) for t in texts[:200]])
    cosines = (alone * vectors["openvino"][:200]).sum(axis=1)
    result["openvino_documents_alone_vs_batch"] = {
        "min": round(float(cosines.min()), 7),
        "mean": round(float(cosines.mean()), 7),
        "precision": embedders["openvino"].precision,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
