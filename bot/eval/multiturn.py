"""`kbbot eval multiturn`: MTRAG-UN conversations over four KBs (one per collection), and CANARD rewrites.

For each task the query is (a) the raw last user turn, (b) kbbot's condensed standalone query (the
engine's condenser with the conversation as history), (c) the whole conversation concatenated (and,
as a reference, all user turns only). For each: recall@5 of the task's gold passages when searching
its collection's KB, and routing accuracy (did the router rank the task's collection first).
On CANARD: token F1 of the offline condensed question vs the human rewrite, next to the raw question's.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

from bot.core import Origin, Turn
from bot.eval.datasets import file_digest, read_jsonl, resolve
from bot.eval.engine import ask, make_engine, progress
from bot.eval.metrics import token_f1
from bot.eval.workspace import EvalWorkspace

DESCRIPTIONS = {
    "clapnq": "Wikipedia passages: general knowledge about history, people, places, science and culture.",
    "fiqa": "Personal finance questions and answers: investing, taxes, loans, banking, budgeting.",
    "govt": "Government web pages: public services, benefits, regulations, health and safety guidance.",
    "ibmcloud": "IBM Cloud documentation: services, APIs, command line, configuration and troubleshooting.",
}
VARIANTS = ("raw", "condensed", "conversation", "user_turns")


def _passage_name(document_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in document_id)[:80]
    return f"{safe}-{hashlib.sha1(document_id.encode()).hexdigest()[:6]}"


def passage_records(tasks: list[dict]) -> dict[str, list[tuple[str, str, str]]]:
    """(name, title, text) per distinct passage the tasks cite, by collection (sorted)."""
    passages: dict[str, dict[str, str]] = defaultdict(dict)
    for task in tasks:
        for ctx in task.get("contexts") or []:
            passages[task["Collection"]].setdefault(ctx["document_id"], ctx["text"].strip())
    return {c: [(_passage_name(doc), "", text) for doc, text in passages[c].items()] for c in sorted(passages)}


def build_collections(ws: EvalWorkspace, tasks: list[dict], digest: str, fresh: bool) -> dict[str, str]:
    kbs = {}
    for collection, records in passage_records(tasks).items():
        kb = f"mtrag-{collection}"
        description = DESCRIPTIONS.get(collection, f"Passages of the {collection} collection.")
        build = ws.ensure_kb(kb, description, records, digest + collection, fresh=fresh)
        ws.log(f"[multiturn] KB {kb}: {build.documents} passages{' (reused)' if build.reused else ''}")
        kbs[collection] = kb
    return kbs


def eval_multiturn(
    ws: EvalWorkspace,
    dataset: str = "mtrag-un",
    canard: str = "canard-dev",
    limit: int = 0,
    fresh: bool = False,
    canard_limit: int = 0,
) -> dict:
    path = resolve(dataset)
    tasks = list(read_jsonl(path / "tasks.jsonl"))
    kbs = build_collections(ws, tasks, file_digest(path / "tasks.jsonl"), fresh)
    if limit and limit < len(tasks):  # an evenly spread sample: the file is grouped by collection
        tasks = [tasks[i * len(tasks) // limit] for i in range(limit)]
    engine = make_engine(ws, kbs.values())
    stats = {v: {"recall_sum": 0.0, "recall_n": 0, "routed": 0, "n": 0, "answered": defaultdict(int)} for v in VARIANTS}
    by_answerability: dict[str, int] = defaultdict(int)
    bar = progress(ws, len(tasks), "multiturn")
    for task in tasks:
        turns = task["input"]
        last = turns[-1]["text"]
        history = [Turn("user" if t["speaker"] == "user" else "assistant", t["text"]) for t in turns[:-1]]
        gold_kb = kbs.get(task["Collection"])
        gold = {_passage_name(c["document_id"]) for c in task.get("contexts") or []}
        label = (task.get("answerability") or ["?"])[0]
        by_answerability[label] += 1
        condensed = ask(engine, last, history)
        queries = {
            "raw": None,
            "condensed": condensed,
            "conversation": " ".join(t["text"] for t in turns),
            "user_turns": " ".join(t["text"] for t in turns if t["speaker"] == "user"),
        }
        for variant in VARIANTS:
            asked = queries[variant]
            if asked is None or isinstance(asked, str):
                asked = ask(engine, last if asked is None else asked)
            s = stats[variant]
            s["n"] += 1
            s["routed"] += asked.top_kb == gold_kb
            s["answered"][label] += asked.status == "answered"
            if gold and gold_kb:
                hits = ws.bot.search(Origin.eval({gold_kb}), gold_kb, asked.standalone, k=5)
                found = {e.chunk.document for e in hits}
                s["recall_sum"] += len(gold & found) / len(gold)
                s["recall_n"] += 1
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    variants = {}
    for variant, s in stats.items():
        variants[variant] = {
            "recall@5": round(s["recall_sum"] / max(s["recall_n"], 1), 4),
            "routing_accuracy": round(s["routed"] / max(s["n"], 1), 4),
            "answered_rate_by_answerability": {
                k: round(s["answered"][k] / n, 4) for k, n in sorted(by_answerability.items())
            },
        }
    raw_recall = variants["raw"]["recall@5"]
    result = {
        "dataset": path.name,
        "tasks": len(tasks),
        "tasks_with_gold": stats["raw"]["recall_n"],
        "kbs": kbs,
        "mode": engine.mode,
        "variants": variants,
        "condensed_vs_raw_recall": round(variants["condensed"]["recall@5"] / raw_recall, 3) if raw_recall else None,
        "answerability": dict(by_answerability),
    }
    if canard:
        result["canard"] = eval_canard(ws, canard, canard_limit)
    return result


def eval_canard(ws: EvalWorkspace, dataset: str, limit: int = 0) -> dict:
    rows = list(read_jsonl(resolve(dataset) / "rewrites.jsonl"))
    if limit and limit < len(rows):
        rows = [rows[i * len(rows) // limit] for i in range(limit)]
    raw_f1 = condensed_f1 = 0.0
    changed = 0
    bar = progress(ws, len(rows), "canard")
    for row in rows:
        h = row["history"]
        turns = [Turn("user", f"{h[0]}: {h[1]}" if len(h) > 1 else h[0])] if h else []
        for i, text in enumerate(h[2:]):
            turns.append(Turn("user" if i % 2 == 0 else "assistant", text))
        rewritten = ws.bot.standalone_query(row["question"], turns)
        changed += rewritten.strip() != row["question"].strip()
        raw_f1 += token_f1(row["question"], row["rewrite"])
        condensed_f1 += token_f1(rewritten, row["rewrite"])
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    n = max(len(rows), 1)
    return {
        "dataset": dataset,
        "rows": len(rows),
        "raw_token_f1": round(raw_f1 / n, 4),
        "condensed_token_f1": round(condensed_f1 / n, 4),
        "rewritten_share": round(changed / n, 4),
    }


def format_multiturn(r: dict) -> str:
    lines = [
        f"MTRAG-UN ({r['tasks']} tasks, {r['tasks_with_gold']} with gold passages; KBs {', '.join(r['kbs'].values())}; "
        f"{r['mode']} mode)",
        "",
        "| query | recall@5 | routing accuracy |",
        "|---|---:|---:|",
    ]
    names = {
        "raw": "raw last turn",
        "condensed": "condensed (kbbot)",
        "conversation": "whole conversation",
        "user_turns": "all user turns",
    }
    for variant, row in r["variants"].items():
        lines.append(f"| {names[variant]} | {row['recall@5']:.3f} | {row['routing_accuracy']:.3f} |")
    if r.get("condensed_vs_raw_recall") is not None:
        lines.append(f"\ncondensed / raw recall@5 = {r['condensed_vs_raw_recall']:.2f}×")
    c = r.get("canard")
    if c:
        lines.append(
            f"\nCANARD ({c['rows']} rows): token F1 vs the human rewrite — raw question {c['raw_token_f1']:.3f}, "
            f"offline condensed {c['condensed_token_f1']:.3f} ({c['rewritten_share']:.0%} of questions rewritten)"
        )
    return "\n".join(lines)
