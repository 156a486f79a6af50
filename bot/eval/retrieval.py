"""`kbbot eval retrieval`: kbbot's retrieval beside bm25 / dense / llama-index on a BEIR-layout dataset."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from bot.core import KnowledgeBot, Origin
from bot.eval import baselines
from bot.eval.datasets import BeirDataset, load_beir
from bot.eval.embcache import clear_query_cache
from bot.eval.metrics import evaluate_run, percentile
from bot.eval.workspace import EvalWorkspace

DESCRIPTIONS = {
    "scifact": "Biomedical and scientific research abstracts: studies, trials, molecular biology, medicine.",
    "cranfield": "Aeronautics research papers: aerodynamics, boundary layers, heat transfer, supersonic flow.",
    "cisi": "Library and information science articles: indexing, documentation, information retrieval, libraries.",
}
WARMUP_QUERIES = ["what is known about this topic", "effects of temperature on the results", "how is it measured"]


def kb_name(dataset: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in dataset.lower()).strip("-")[:40] or "dataset"


def description_for(dataset: str) -> str:
    return DESCRIPTIONS.get(dataset, f"Documents of the {dataset} collection.")


def records_of(ds: BeirDataset) -> list[tuple[str, str, str]]:
    """(name, title, text) per document; documents with no text at all are left out (kbbot refuses
    to ingest an empty document; the baselines still get them, so they can only gain from it)."""
    return [(doc_id, title or doc_id, text) for doc_id, (title, text) in ds.corpus.items() if (title + text).strip()]


def build_kb(ws: EvalWorkspace, ds: BeirDataset, kb: str | None = None, fresh: bool = False):
    kb = kb or kb_name(ds.name)
    return kb, ws.ensure_kb(kb, description_for(ds.name), records_of(ds), ds.digest, fresh=fresh)


def kbbot_retriever(ws: EvalWorkspace, kb: str) -> baselines.Retrieve:
    """kbbot's retrieval as the engine uses it: the hybrid searcher with its default configuration."""
    origin = Origin.eval({kb})

    def retrieve(query: str, k: int) -> list[str]:
        return list(dict.fromkeys(e.chunk.document for e in ws.bot.search(origin, kb, query, k)))

    return retrieve


def run_system(ws: EvalWorkspace, name: str, retrieve: baselines.Retrieve, queries: dict[str, str], k: int = 100):
    for q in WARMUP_QUERIES:
        retrieve(q, k)
    clear_query_cache()
    run: dict[str, list[str]] = {}
    latencies: list[float] = []
    bar = _bar(ws, len(queries), name)
    for qid, text in queries.items():
        started = time.perf_counter()
        run[qid] = retrieve(text, k)
        latencies.append((time.perf_counter() - started) * 1000)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return run, latencies


def measure_ingest(ws: EvalWorkspace, ds: BeirDataset, sample: int) -> dict:
    """Uncached, same run: kbbot's whole ingest of N documents vs sentence-transformers' bare torch encode
    of (a) the same documents as one text each and (b) the very chunk texts kbbot embeds.

    Interleaved, so a load that changes during the run shows: bare docs, kbbot, bare chunks, bare docs
    again; the docs ratio is against the mean of the two bare docs encodes (both are reported)."""
    from bot.config import load_settings

    records = records_of(ds)[:sample]
    model = baselines.bare_torch_model(ws.embedder.inner)  # the plain, uncached model, torch backend
    docs = [baselines.doc_text(t, x) for _, t, x in records]
    bare_docs: list[tuple[float, float]] = []  # (wall, CPU) seconds of each bare encode of the documents
    if model is not None:
        ws.log(f"[{ds.name}] ingest speed on {len(records)} documents (no cache): bare encode…")
        bare_docs.append(baselines.bare_encode_seconds(model, docs))
    probe_dir = ws.dir / "ingest-probe"
    shutil.rmtree(probe_dir, ignore_errors=True)
    # The same process-wide model, no cache: the model cache must be the workspace's, or an ONNX runtime would
    # load a second model and export it afresh into the probe's empty data dir inside the timed ingest.
    probe_settings = load_settings(data_dir=probe_dir, model_cache_dir=ws.settings.tools.resolved_model_cache_dir)
    probe = KnowledgeBot(probe_settings)
    operator = Origin.cli()
    probe.create_kb(operator, "probe", "ingest speed probe")
    ws.log(f"[{ds.name}] ingest speed: kbbot ingest…")
    started, cpu_started = time.perf_counter(), time.process_time()
    report = probe.ingest_records(operator, "probe", records, progress=False)
    kbbot_s, kbbot_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    texts = probe.embedded_texts(operator, "probe")
    probe.close()
    shutil.rmtree(probe_dir, ignore_errors=True)
    out = {
        "sample_docs": len(records),
        "chunks": report.embedded_chunks,
        "kbbot_ingest_s": round(kbbot_s, 2),
        "kbbot_docs_per_s": round(len(records) / kbbot_s, 2),
        "kbbot_ingest_cpu_s": round(kbbot_cpu_s, 2),
        "cache": False,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    if model is None:
        return out
    ws.log(f"[{ds.name}] ingest speed: bare encode of kbbot's {len(texts)} chunk texts…")
    bare_chunks, bare_chunks_cpu = baselines.bare_encode_seconds(model, texts)
    ws.log(f"[{ds.name}] ingest speed: bare encode of the documents again…")
    bare_docs.append(baselines.bare_encode_seconds(model, docs))
    docs_s = sum(wall for wall, _ in bare_docs) / len(bare_docs)
    docs_cpu_s = sum(cpu for _, cpu in bare_docs) / len(bare_docs)
    return out | {
        "bare_backend": "torch",
        "bare_encode_docs_s": round(docs_s, 2),
        "bare_encode_docs_runs_s": [round(wall, 2) for wall, _ in bare_docs],
        "bare_docs_per_s": round(len(records) / docs_s, 2),
        "ratio_vs_bare_docs": round(kbbot_s / docs_s, 3),
        "bare_encode_chunks_s": round(bare_chunks, 2),
        "ratio_vs_bare_chunks": round(kbbot_s / bare_chunks, 3),
        "bare_encode_docs_cpu_s": round(docs_cpu_s, 2),
        "bare_encode_chunks_cpu_s": round(bare_chunks_cpu, 2),
        "cpu_ratio_vs_bare_docs": round(kbbot_cpu_s / docs_cpu_s, 3),
        "cpu_ratio_vs_bare_chunks": round(kbbot_cpu_s / bare_chunks_cpu, 3),
        # What each side feeds the model: kbbot's chunks (title on each, overlapping) vs the documents cut at
        # the model's window.
        "word_pieces_kbbot": _word_pieces(model, texts),
        "word_pieces_bare_docs": _word_pieces(model, docs),
    }


def _word_pieces(model, texts: list[str]) -> int:
    """Word pieces the model reads of the texts (with [CLS]/[SEP], truncated at its window)."""
    encoded = model.tokenizer(
        [t.strip() for t in texts], truncation=True, max_length=model.max_seq_length, add_special_tokens=True
    )
    return sum(len(ids) for ids in encoded["input_ids"])


def eval_retrieval(
    ws: EvalWorkspace,
    path: Path,
    split: str = "test",
    systems: tuple[str, ...] = ("kbbot", "bm25", "dense", "llamaindex"),
    ingest_sample: int = 500,
    fresh: bool = False,
    k: int = 100,
) -> dict:
    ds = load_beir(path, split)
    queries = ds.judged_queries()
    ws.log(f"[{ds.name}] {len(ds.corpus)} documents, {len(queries)} judged {split} queries")
    kb, build = build_kb(ws, ds, fresh=fresh)
    if build.reused:
        ws.log(f"[{ds.name}] reusing KB {kb!r} built {build.built_at}")
    makers: dict[str, Callable[[], baselines.Retrieve]] = {
        "kbbot": lambda: kbbot_retriever(ws, kb),
        "bm25": lambda: baselines.bm25_baseline(ds.corpus),
        "dense": lambda: baselines.dense_baseline(
            ws.baseline_client, f"baseline_dense_{build.fingerprint}", ds.corpus, ws.embedder
        ),
        "llamaindex": lambda: baselines.llamaindex_baseline(ds.corpus, ws.embedder),
    }
    results: dict[str, dict] = {}
    baseline_cache = {"hits": 0, "misses": 0}
    for name in systems:
        hits0, misses0 = ws.embedder.counters()
        ws.log(f"[{ds.name}] {name}: indexing…" if name != "kbbot" else f"[{ds.name}] kbbot: querying…")
        started = time.perf_counter()
        retrieve = makers[name]()
        index_s = time.perf_counter() - started
        hits1, misses1 = ws.embedder.counters()
        if name != "kbbot":
            baseline_cache["hits"] += hits1 - hits0
            baseline_cache["misses"] += misses1 - misses0
        run, latencies = run_system(ws, name, retrieve, queries, k)
        scores = {m: round(v, 4) for m, v in evaluate_run(run, ds.qrels).items()}
        results[name] = scores | {
            "p50_ms": round(percentile(latencies, 50), 1),
            "p95_ms": round(percentile(latencies, 95), 1),
        }
        if name != "kbbot":
            results[name]["index_s"] = round(index_s, 2)
    output = {
        "dataset": ds.name,
        "path": str(ds.path),
        "split": split,
        "queries": len(queries),
        "documents": len(ds.corpus),
        "kb": kb,
        "chunks": build.chunks,
        "systems": results,
        "kb_build": build.to_json(),
        "baseline_embedding_cache": baseline_cache,
    }
    if ingest_sample:
        output["ingest"] = measure_ingest(ws, ds, ingest_sample)
    notes = []
    empty = len(ds.corpus) - build.documents
    if empty:
        notes.append(f"{empty} documents with no text were not ingested by kbbot (it refuses empty documents)")
    if build.reused:
        notes.append(f"kbbot KB reused from {build.built_at}; its ingest figures are from that build")
    if build.used_cache:
        notes.append(
            f"kbbot KB build used the embedding cache for {build.cache_hits}/"
            f"{build.cache_hits + build.cache_misses} chunks"
        )
    if baseline_cache["hits"]:
        notes.append(f"baseline document embeddings from the cache: {baseline_cache['hits']}")
    output["notes"] = notes
    return output


def _bar(ws: EvalWorkspace, total: int, desc: str):
    if not ws.progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", leave=False)


def format_table(result: dict) -> str:
    cols = ["ndcg@10", "recall@10", "recall@100", "mrr@10", "hit@5", "p50_ms", "p95_ms"]
    lines = [f"| system | {' | '.join(cols)} |", "|---|" + "---:|" * len(cols)]
    for name, row in result["systems"].items():
        cells = [f"{row[c]:.3f}" if c not in ("p50_ms", "p95_ms") else f"{row[c]:.1f}" for c in cols]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def format_ingest(result: dict) -> str:
    ing = result.get("ingest")
    build = result["kb_build"]
    lines = [
        f"full KB build: {build['documents']} docs → {build['chunks']} chunks in {build['ingest_s']:.1f} s "
        f"({build['docs_per_s']:.1f} docs/s){' [embedding cache used]' if build['used_cache'] else ''}"
        f"{' [reused from ' + build['built_at'] + ']' if build['reused'] else ''}",
    ]
    if ing:
        lines.append(
            f"ingest speed, {ing['sample_docs']} docs, no cache: kbbot {ing['kbbot_ingest_s']:.1f} s "
            f"({ing['kbbot_docs_per_s']:.1f} docs/s, {ing['chunks']} chunks)"
            + (
                f"; bare encode of the docs {ing['bare_encode_docs_s']:.1f} s → ratio {ing['ratio_vs_bare_docs']:.2f}×"
                if "bare_encode_docs_s" in ing
                else ""
            )
            + (
                f"; bare encode of kbbot's chunk texts {ing['bare_encode_chunks_s']:.1f} s → ratio "
                f"{ing['ratio_vs_bare_chunks']:.2f}×"
                if "bare_encode_chunks_s" in ing
                else ""
            )
        )
    return "\n".join(lines)
