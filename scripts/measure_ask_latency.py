"""Warm offline latency of `ask`, in-process, on a KB of the 5,183 SciFact abstracts.

    .venv/bin/python scripts/measure_ask_latency.py [--data-dir /tmp/kbbot-scifact-ask] [--questions 300]

The first run ingests the corpus into a KB `scifact` under --data-dir (through the normal pipeline,
`service.ingestor.ingest_texts`); later runs reuse it. Then the engine is loaded and warmed, and every
question (SciFact's test claims, in file order) is answered once with `AnswerEngine.answer` (offline:
no OPENAI_API_KEY), timing each call end to end. Printed: p50/p95/mean/max, the share answered, the
mean per step, and the machine's load average before and after — on a shared machine, numbers taken
under load are not the engine's; rerun when `uptime` is quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DATASET = REPO.parent / "shared" / "datasets" / "scifact"
KB = "scifact"
DESCRIPTION = "SciFact: abstracts of biomedical research papers (claims about diseases, genes, drugs, cells)."


def load_settings(data_dir: Path):
    from bot.config import Settings

    manifests = data_dir / "no-declared-kbs"  # only the scifact KB: no sample KBs in this store
    manifests.mkdir(parents=True, exist_ok=True)
    return Settings(
        _env_file=None,
        KBBOT_DATA_DIR=data_dir,
        KBBOT_KNOWLEDGE_BASES_DIR=manifests,
        OPENAI_API_KEY=None,
        OPENAI_BASE_URL=None,
        CHROMA_HOST=None,
    )


def ensure_corpus(service, dataset: Path) -> int:
    """Ingest the corpus once; returns the number of live documents."""
    from tools.store import KnowledgeBaseError

    try:
        service.store.require_kb(KB)
        live = len(service.store.live_versions(KB))
    except KnowledgeBaseError:
        live = 0
    records = []
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            records.append((f"{row['_id']}.txt", row.get("title") or row["_id"], row.get("text") or ""))
    if live >= len(records):
        return live
    print(f"ingesting {len(records)} SciFact abstracts into {KB!r} (once; {live} already live)…", flush=True)
    started = time.perf_counter()
    if live == 0:
        service.create_kb(KB, DESCRIPTION)
    report = service.ingestor.ingest_texts(KB, records, progress=True)
    failed = [d for d in report.documents if d.status == "failed"]
    print(
        f"ingested in {time.perf_counter() - started:.0f} s: "
        f"{len(report.documents) - len(failed)} ok, {len(failed)} failed"
    )
    return len(service.store.live_versions(KB))


def load_questions(dataset: Path, limit: int) -> list[str]:
    test_ids: list[str] = []
    qrels = dataset / "qrels" / "test.tsv"
    if qrels.is_file():
        for line in qrels.read_text(encoding="utf-8").splitlines()[1:]:
            qid = line.split("\t", 1)[0]
            if qid and qid not in test_ids:
                test_ids.append(qid)
    by_id = {}
    with (dataset / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            by_id[str(row["_id"])] = row["text"]
    ordered = [by_id[q] for q in test_ids if q in by_id] or list(by_id.values())
    return ordered[:limit]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
        return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} CPUs)"
    except OSError:
        return "load average unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/kbbot-scifact-ask"))
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--questions", type=int, default=300, help="how many questions to time (≥ 100)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line too")
    parser.add_argument(
        "--embedding-cache",
        type=Path,
        default=None,
        help="ingest only: serve document embeddings from (and add them to) this cache, as `kbbot eval` does",
    )
    args = parser.parse_args(argv)

    from bot.agent.engine import AnswerEngine
    from tools.service import KnowledgeService

    settings = load_settings(args.data_dir)
    with KnowledgeService(settings.tools) as ingest_service:
        if args.embedding_cache is not None:
            from bot.eval.embcache import CachingEmbedder, EmbeddingCache

            ingest_service.embedder = CachingEmbedder(ingest_service.embedder, EmbeddingCache(args.embedding_cache))
        documents = ensure_corpus(ingest_service, args.dataset)
    # Measured: a fresh service, exactly as `kbbot ask` builds it (no cache in the query path).
    service = KnowledgeService(settings.tools)
    questions = load_questions(args.dataset, args.questions)
    engine = AnswerEngine(service)
    assert engine.mode == "offline", "measure the offline engine: unset OPENAI_API_KEY"

    for question in questions[: args.warmup]:  # model loaded, indexes in memory, caches primed
        engine.answer(question)

    before = load_average()
    latencies: list[float] = []
    steps: dict[str, list[float]] = {}
    rounds: list[int] = []
    answered = 0
    for question in questions:
        started = time.perf_counter()
        answer = engine.answer(question)
        latencies.append((time.perf_counter() - started) * 1000)
        answered += answer.answered
        rounds.append(len(answer.rounds))
        for name, ms in answer.timings_ms.items():
            steps.setdefault(name, []).append(ms)
    after = load_average()

    summary = {
        "kb_documents": documents,
        "questions": len(latencies),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "mean_ms": round(statistics.fmean(latencies), 1),
        "max_ms": round(max(latencies), 1),
        "answered": answered,
        "mean_rounds": round(statistics.fmean(rounds), 2),
        "mean_step_ms": {k: round(statistics.fmean(v), 1) for k, v in steps.items()},
        "load_before": before,
        "load_after": after,
    }
    print(f"SciFact KB: {documents} abstracts; {len(latencies)} questions, engine warm, offline, in-process")
    print(
        f"ask latency: p50 {summary['p50_ms']} ms · p95 {summary['p95_ms']} ms · "
        f"mean {summary['mean_ms']} ms · max {summary['max_ms']} ms"
    )
    print(f"answered {answered}/{len(latencies)}; mean rounds {summary['mean_rounds']}")
    print("mean per step (ms): " + ", ".join(f"{k} {v}" for k, v in summary["mean_step_ms"].items()))
    print(f"before: {before}\nafter:  {after}")
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
