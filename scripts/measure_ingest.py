"""Ingest throughput on the SciFact corpus next to the bare sentence-transformers encode rate.

    .venv/bin/python scripts/measure_ingest.py [--corpus PATH] [--limit N] [--profile FILE]

Both are measured in this one process with the same loaded model: bare `SentenceTransformer.encode`
of "title text" for every abstract (batch 64, the same settings kbbot uses), then kbbot's own
`KnowledgeService.ingestor.ingest_texts(kb, records)` into a fresh temp data dir (parse → chunk →
embed → Chroma → registry → BM25), then the bare encode once more, so a machine whose load changes
during the run shows up as two different bare numbers. Model loading is timed separately and is in
neither number. The ingest's time is split into phases (tokenising for the chunker, embedding,
keyword index, the rest: Chroma writes, registry, node building).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's kbbot, not whichever one the venv was installed from
DEFAULT_CORPUS = REPO.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl"


class PhaseTimer:
    """Wraps the embedder the ingestor uses and adds up where its time goes."""

    def __init__(self, inner):
        self.inner = inner
        self.model_name, self.dimension = inner.model_name, inner.dimension
        self.embed_s = self.tokenize_s = 0.0
        self.embedded = 0

    def embed_documents(self, texts, show_progress=False):
        started = time.perf_counter()
        try:
            return self.inner.embed_documents(texts, show_progress)
        finally:
            self.embed_s += time.perf_counter() - started
            self.embedded += len(texts)

    def embed_documents_with_units(self, texts, unit_spans, show_progress=False):
        started = time.perf_counter()
        try:
            return self.inner.embed_documents_with_units(texts, unit_spans, show_progress)
        finally:
            self.embed_s += time.perf_counter() - started
            self.embedded += len(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)

    def tokenize(self, text):
        started = time.perf_counter()
        try:
            return self.inner.tokenize(text)
        finally:
            self.tokenize_s += time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=0, help="first N abstracts only (0: all)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the ingest to this file")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from bot.config import Settings
    from tools.embeddings import get_embedder
    from tools.service import KnowledgeService

    rows = [json.loads(line) for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.limit:
        rows = rows[: args.limit]
    records = [(str(r["_id"]), str(r.get("title") or ""), str(r.get("text") or "")) for r in rows]
    texts = [f"{title} {text}".strip() for _, title, text in records]

    with tempfile.TemporaryDirectory(prefix="kbbot-measure-") as tmp:
        settings = Settings(
            _env_file=None,
            KBBOT_DATA_DIR=Path(tmp) / "data",
            KBBOT_KNOWLEDGE_BASES_DIR=Path(tmp) / "none",
            OPENAI_API_KEY=None,
            CHROMA_HOST=None,
        )
        started = time.perf_counter()
        embedder = get_embedder(settings.tools)
        load_s = time.perf_counter() - started
        model = embedder._model  # the SentenceTransformer kbbot itself uses (max_seq_length 256)
        model.encode(texts[:64], batch_size=64)  # warm-up (first-call allocations), in neither number

        def bare() -> float:
            started = time.perf_counter()
            model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
            return time.perf_counter() - started

        bare_before = bare()

        service = KnowledgeService(settings.tools)
        timer = PhaseTimer(embedder)
        service.__dict__["embedder"] = timer
        service.create_kb("scifact", "SciFact abstracts (measurement)")
        keyword_s = 0.0
        rebuild = service.store.rebuild_keyword_index

        def timed_rebuild(*a, **k):
            nonlocal keyword_s
            t = time.perf_counter()
            try:
                return rebuild(*a, **k)
            finally:
                keyword_s += time.perf_counter() - t

        service.store.rebuild_keyword_index = timed_rebuild  # type: ignore[method-assign]
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        started = time.perf_counter()
        report = service.ingestor.ingest_texts("scifact", records)
        ingest_s = time.perf_counter() - started
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(args.profile))
        service.close()

        bare_after = bare()

    failed = [d for d in report.documents if d.status != "ready"]
    bare_s = (bare_before + bare_after) / 2
    result = {
        "documents": len(records),
        "chunks": report.embedded_chunks,
        "failed": len(failed),
        "model_load_s": round(load_s, 2),
        "bare_encode_s": [round(bare_before, 2), round(bare_after, 2)],
        "bare_encode_docs_per_s": round(len(texts) / bare_s, 2),
        "ingest_s": round(ingest_s, 2),
        "ingest_docs_per_s": round(len(records) / ingest_s, 2),
        "ingest_vs_bare": round(bare_s / ingest_s, 3),
        "ingest_phases_s": {
            "embed": round(timer.embed_s, 2),
            "tokenize_for_chunking": round(timer.tokenize_s, 2),
            "keyword_index": round(keyword_s, 2),
            "other (parse/split, nodes, chroma, registry)": round(
                ingest_s - timer.embed_s - timer.tokenize_s - keyword_s, 2
            ),
        },
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"SciFact: {result['documents']} abstracts → {result['chunks']} chunks ({result['failed']} failed)")
        print(
            f"bare SentenceTransformer.encode: {result['bare_encode_docs_per_s']} docs/s "
            f"(runs {result['bare_encode_s'][0]} s before, {result['bare_encode_s'][1]} s after the ingest)"
        )
        print(
            f"kbbot ingest_texts:              {result['ingest_docs_per_s']} docs/s ({result['ingest_s']} s; "
            f"{result['ingest_vs_bare']:.0%} of the bare rate)"
        )
        print("ingest phases (s): " + ", ".join(f"{k} {v}" for k, v in result["ingest_phases_s"].items()))
        print(
            f"model load {result['model_load_s']} s (in neither number); {result['cpus']} CPUs, "
            f"load average {result['load_avg_1m']} at the end"
        )
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
