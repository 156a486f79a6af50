"""`kbbot eval abstention`: SQuAD 2.0 sample — answer the answerable, refuse the unanswerable.

The KB holds the sample's paragraphs. SQuAD 2.0's unanswerable questions are adversarial: each was
written against a paragraph that is on topic but lacks the answer, so retrieval finds strong, similar
evidence for them. An offline sufficiency check built on similarity and term coverage cannot tell
those apart well; the report says how far it gets, and the mode it ran in.
"""

from __future__ import annotations

import hashlib
import json

from bot.core import Origin
from bot.eval.datasets import file_digest, read_jsonl, resolve
from bot.eval.engine import ask, make_engine, progress
from bot.eval.metrics import contains_answer, percentile
from bot.eval.workspace import EvalWorkspace

KB = "squad2"
DESCRIPTION = "Wikipedia paragraphs on many topics: history, science, places, people, organisations."


def squad_records(rows: list[dict]) -> list[tuple[str, str, str]]:
    """(name, title, text) per distinct paragraph of the questions, in order of first appearance."""
    paragraphs: dict[str, str] = {}
    for row in rows:
        paragraphs.setdefault(hashlib.sha256(row["context"].encode()).hexdigest()[:12], row["context"])
    return [(f"p{i:03d}-{key}", "", text) for i, (key, text) in enumerate(paragraphs.items())]


def eval_abstention(ws: EvalWorkspace, dataset: str = "squad2-sample", limit: int = 0, fresh: bool = False) -> dict:
    path = resolve(dataset)
    rows = list(read_jsonl(path / "questions.jsonl"))
    records = squad_records(rows)
    build = ws.ensure_kb(KB, DESCRIPTION, records, file_digest(path / "questions.jsonl"), fresh=fresh)
    ws.log(
        f"[abstention] KB {KB}: {build.documents} paragraphs, {build.chunks} chunks"
        f"{' (reused)' if build.reused else ''}"
    )
    if limit:
        rows = rows[:limit]
    engine = make_engine(ws, [KB])
    bar = progress(ws, len(rows), "abstention")
    answerable = {"n": 0, "answered": 0, "cited_gold": 0, "answer_has_gold": 0}
    unanswerable = {"n": 0, "abstained": 0}
    latencies = []
    # Per question, what it was judged on (scripts/fit_sufficiency.py reads it): should it answer?
    dump = ws.dir / "abstention-cases.jsonl"
    out = dump.open("w", encoding="utf-8")
    for row in rows:
        asked = ask(engine, row["question"])
        latencies.append(asked.ms)
        case = {"question": row["question"], "should_answer": not row.get("is_impossible"), "status": asked.status}
        out.write(json.dumps({**case, "rounds": asked.graded}, ensure_ascii=False) + "\n")
        if row.get("is_impossible"):
            unanswerable["n"] += 1
            unanswerable["abstained"] += asked.status == "insufficient_context"
        else:
            answerable["n"] += 1
            if asked.status == "answered":
                answerable["answered"] += 1
                cited = ws.bot.cited_texts(Origin.eval({KB}), asked.citations)
                answerable["cited_gold"] += any(contains_answer(text, row["answers"]) for text in cited)
                answerable["answer_has_gold"] += contains_answer(asked.answer, row["answers"])
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    out.close()
    n_a, n_u = max(answerable["n"], 1), max(unanswerable["n"], 1)
    return {
        "dataset": path.name,
        "kb": KB,
        "paragraphs": build.documents,
        "questions": len(rows),
        "mode": engine.mode,
        "answerable": {
            "questions": answerable["n"],
            "answered_rate": round(answerable["answered"] / n_a, 4),
            "cited_chunk_has_gold_rate": round(answerable["cited_gold"] / n_a, 4),
            "cited_chunk_has_gold_when_answered": round(answerable["cited_gold"] / max(answerable["answered"], 1), 4),
            "answer_text_has_gold_rate": round(answerable["answer_has_gold"] / n_a, 4),
        },
        "unanswerable": {
            "questions": unanswerable["n"],
            "abstention_rate": round(unanswerable["abstained"] / n_u, 4),
        },
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "kb_build": build.to_json(),
        "dump": str(dump),
    }


def format_abstention(r: dict) -> str:
    a, u = r["answerable"], r["unanswerable"]
    return "\n".join(
        [
            f"SQuAD 2.0 sample ({r['questions']} questions, {r['paragraphs']} paragraphs, {r['mode']} mode)",
            "",
            "| questions | n | answered | abstained | cited chunk has a gold answer | answer text has a gold answer |",
            "|---|---:|---:|---:|---:|---:|",
            f"| answerable | {a['questions']} | {a['answered_rate']:.3f} | {1 - a['answered_rate']:.3f} | "
            f"{a['cited_chunk_has_gold_rate']:.3f} ({a['cited_chunk_has_gold_when_answered']:.3f} of answered) | "
            f"{a['answer_text_has_gold_rate']:.3f} |",
            f"| unanswerable | {u['questions']} | {1 - u['abstention_rate']:.3f} | {u['abstention_rate']:.3f}"
            " | – | – |",
            "",
            f"engine latency p50 {r['p50_ms']:.0f} ms, p95 {r['p95_ms']:.0f} ms",
        ]
    )
