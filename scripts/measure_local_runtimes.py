"""The local MiniLM's runtimes side by side: are their vectors torch's, and how fast is each.

    .venv/bin/python scripts/measure_local_runtimes.py [--docs 600] [--rounds 2] [--queries 200] [--json]

Real chunk texts: the first N SciFact abstracts cut as kbbot cuts them (180-token windows, 24 overlap,
"title\\nchunk" as embedded). Each runtime embeds the same texts; the cosine of each row to torch's row
is reported (min, p1, mean). Speed is a bare `embed_documents` of the same texts, the runtimes
interleaved (torch, onnx, onnx-int8, torch, ...) so a change of machine load hits them alike, and single
query encodes (one text at a time, `_encode_one`, the query path) of SciFact queries, interleaved too.
int8's dynamic quantisation scales activations per batch, so the same text embedded alone and in a
batch differ a little: `int8_alone_vs_batch` is that cosine.
"""

from __future__ import annotations

import argparse
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
RUNTIMES = ("torch", "onnx", "onnx-int8")


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=600, help="SciFact abstracts to chunk")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved timing rounds")
    parser.add_argument("--queries", type=int, default=200, help="single-query encodes per runtime and round")
    parser.add_argument("--model-cache", type=Path, default=Path(tempfile.gettempdir()) / "kbbot-models")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from bot.eval.datasets import load_beir
    from tools.embeddings import LocalMiniLM
    from tools.onnx_minilm import OnnxMiniLM

    started = time.perf_counter()
    embedders = {"torch": LocalMiniLM()}
    for runtime in RUNTIMES[1:]:
        embedders[runtime] = OnnxMiniLM(args.model_cache, runtime)
    load_s = round(time.perf_counter() - started, 1)
    texts = chunk_texts(args.docs, embedders["onnx"].tokenize)
    queries = list(load_beir(DATASET).judged_queries().values())[: args.queries]
    for embedder in embedders.values():
        embedder.embed_documents(texts[:64])  # warm up
    vectors: dict[str, np.ndarray] = {}
    seconds: dict[str, list[float]] = {r: [] for r in RUNTIMES}
    query_ms: dict[str, list[float]] = {r: [] for r in RUNTIMES}
    for _ in range(args.rounds):
        for runtime, embedder in embedders.items():
            begun = time.perf_counter()
            vectors[runtime] = embedder.embed_documents(texts)
            seconds[runtime].append(time.perf_counter() - begun)
        for runtime, embedder in embedders.items():
            begun = time.perf_counter()
            for query in queries:
                embedder._encode_one(query)
            query_ms[runtime].append((time.perf_counter() - begun) * 1000 / max(1, len(queries)))
    result: dict = {
        "texts": len(texts),
        "docs": args.docs,
        "load_s_all_runtimes": load_s,
        "cpu_count": len(os.sched_getaffinity(0)),
        "loadavg_after": os.getloadavg(),
        "runtimes": {},
    }
    for runtime in RUNTIMES:
        cosines = (vectors[runtime] * vectors["torch"]).sum(axis=1)
        result["runtimes"][runtime] = {
            "cosine_to_torch": {
                "min": round(float(cosines.min()), 6),
                "p1": round(float(np.percentile(cosines, 1)), 6),
                "mean": round(float(cosines.mean()), 6),
            },
            "texts_per_s": [round(len(texts) / s, 1) for s in seconds[runtime]],
            "query_ms": [round(ms, 2) for ms in query_ms[runtime]],
        }
    alone = np.stack([embedders["onnx-int8"]._encode_one(t) for t in texts[:200]])
    result["int8_alone_vs_batch"] = {
        "min": round(float((alone * vectors["onnx-int8"][:200]).sum(axis=1).min()), 6),
        "mean": round(float((alone * vectors["onnx-int8"][:200]).sum(axis=1).mean()), 6),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
