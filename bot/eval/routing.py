"""`kbbot eval routing`: one KB per dataset; every test query through the real engine's router.

In-KB: top-1 routing accuracy, a confusion matrix, and the answered rate. Out-of-KB: each dataset in
turn is left out and its queries sent to the remaining KBs; they should come back "insufficient
context", while the other datasets' queries should still be answered — one engine setting for all.
"""

from __future__ import annotations

import json

from bot.eval.datasets import load_beir, resolve
from bot.eval.engine import ask, make_engine, progress
from bot.eval.metrics import percentile
from bot.eval.retrieval import build_kb, kb_name
from bot.eval.workspace import EvalWorkspace


def eval_routing(ws: EvalWorkspace, names: list[str], split: str = "test", fresh: bool = False) -> dict:
    datasets = [load_beir(resolve(n), split) for n in names]
    kbs = []
    for ds in datasets:
        kb, build = build_kb(ws, ds, fresh=fresh)
        ws.log(f"[routing] KB {kb}: {build.documents} docs{' (reused)' if build.reused else ''}")
        kbs.append(kb)
    queries = [(kb, text) for kb, ds in zip(kbs, datasets, strict=True) for text in ds.judged_queries().values()]
    engine = make_engine(ws, kbs)

    def run_all(allowed: list[str], label: str) -> list[tuple[str, object]]:
        engine.limit(allowed)
        bar = progress(ws, len(queries), label)
        out = []
        for kb, text in queries:
            out.append((kb, ask(engine, text)))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        return out

    # Per question and run, what it was judged on (scripts/fit_sufficiency.py reads it): should it answer?
    dump = ws.dir / "routing-cases.jsonl"
    out = dump.open("w", encoding="utf-8")

    def record(run: str, asked: list[tuple[str, object]], left_out: str = "") -> None:
        for (kb, text), (_, a) in zip(queries, asked, strict=True):
            row = {"run": run, "kb": kb, "question": text, "should_answer": kb != left_out, "status": a.status}
            out.write(json.dumps({**row, "top_kb": a.top_kb, "rounds": a.graded}, ensure_ascii=False) + "\n")

    full = run_all(kbs, "routing")
    record("all", full)
    confusion = {kb: {other: 0 for other in kbs} for kb in kbs}
    for kb, asked in full:
        if asked.top_kb in confusion[kb]:
            confusion[kb][asked.top_kb] += 1
    correct = sum(asked.top_kb == kb for kb, asked in full)
    per_kb = {kb: round(confusion[kb][kb] / max(sum(confusion[kb].values()), 1), 4) for kb in kbs}
    result = {
        "datasets": names,
        "kbs": kbs,
        "queries": len(full),
        "top1_accuracy": round(correct / max(len(full), 1), 4),
        "per_kb_accuracy": per_kb,
        "co_routed_share": round(sum(len(a.route_kbs) > 1 for _, a in full) / max(len(full), 1), 4),
        "confusion": confusion,
        "in_kb_answered_rate": round(sum(a.status == "answered" for _, a in full) / max(len(full), 1), 4),
        "p50_ms": round(percentile([a.ms for _, a in full], 50), 1),
        "p95_ms": round(percentile([a.ms for _, a in full], 95), 1),
        "mode": engine.mode,
    }
    cases = {}
    refused_total = answered_total = out_total = in_total = 0
    for left_out in kbs:
        remaining = [kb for kb in kbs if kb != left_out]
        asked = run_all(remaining, f"without {left_out}")
        record(f"without {left_out}", asked, left_out)
        out_of_kb = [a for kb, a in asked if kb == left_out]
        in_kb = [a for kb, a in asked if kb != left_out]
        refused = sum(a.status == "insufficient_context" for a in out_of_kb)
        answered = sum(a.status == "answered" for a in in_kb)
        cases[left_out] = {
            "out_of_kb_queries": len(out_of_kb),
            "refused_rate": round(refused / max(len(out_of_kb), 1), 4),
            "in_kb_queries": len(in_kb),
            "in_kb_answered_rate": round(answered / max(len(in_kb), 1), 4),
            "in_kb_top1_accuracy": round(
                sum(a.top_kb == kb for kb, a in asked if kb != left_out) / max(len(in_kb), 1), 4
            ),
        }
        refused_total += refused
        out_total += len(out_of_kb)
        answered_total += answered
        in_total += len(in_kb)
    out.close()
    result["dump"] = str(dump)
    result["leave_one_out"] = {
        "cases": cases,
        "refused_rate": round(refused_total / max(out_total, 1), 4),
        "in_kb_answered_rate": round(answered_total / max(in_total, 1), 4),
        "setting": "the engine's default offline sufficiency check, identical for every case",
    }
    return result


def format_routing(r: dict) -> str:
    kbs = r["kbs"]
    lines = [
        f"routing over {', '.join(kbs)} ({r['queries']} queries, {r['mode']} mode): top-1 accuracy "
        f"{r['top1_accuracy']:.3f}; answered {r['in_kb_answered_rate']:.3f}; co-routed {r['co_routed_share']:.3f}; "
        f"engine p50 {r['p50_ms']:.0f} ms, p95 {r['p95_ms']:.0f} ms",
        "",
        "| true \\ routed | " + " | ".join(kbs) + " |",
        "|---|" + "---:|" * len(kbs),
    ]
    for kb in kbs:
        lines.append(f"| {kb} | " + " | ".join(str(r["confusion"][kb][o]) for o in kbs) + " |")
    loo = r["leave_one_out"]
    lines += [
        "",
        "| left out | its queries refused | other queries answered | other queries top-1 |",
        "|---|---:|---:|---:|",
    ]
    for kb, case in loo["cases"].items():
        lines.append(
            f"| {kb} | {case['refused_rate']:.3f} ({case['out_of_kb_queries']}) | "
            f"{case['in_kb_answered_rate']:.3f} ({case['in_kb_queries']}) | {case['in_kb_top1_accuracy']:.3f} |"
        )
    lines.append(f"| **all cases** | **{loo['refused_rate']:.3f}** | **{loo['in_kb_answered_rate']:.3f}** | |")
    return "\n".join(lines)


__all__ = ["eval_routing", "format_routing", "kb_name"]
