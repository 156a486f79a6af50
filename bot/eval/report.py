"""`kbbot eval all` (what `make bench` runs): every benchmark, then docs/benchmarks.md.

The generated part of docs/benchmarks.md is replaced on every run; anything after the
END_MARKER line (hand-written analysis) is kept as it is.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

from bot.config import REPO_ROOT
from bot.eval.datasets import resolve
from bot.eval.workspace import EvalWorkspace

END_MARKER = "<!-- end of generated report: hand-written notes below are kept by `kbbot eval all` -->"
RETRIEVAL_DATASETS = ("scifact", "cranfield", "cisi")
COMMANDS = [
    "kbbot eval retrieval --dataset scifact      # + --json for the machine-readable result",
    "kbbot eval retrieval --dataset cranfield",
    "kbbot eval retrieval --dataset cisi",
    "kbbot eval retrieval --dataset scifact --split train   # the split used for tuning",
    "kbbot eval routing --datasets scifact,cranfield,cisi",
    "kbbot eval abstention --dataset squad2-sample",
    "kbbot eval multiturn --dataset mtrag-un      # includes canard-dev token F1",
    "kbbot eval company --split test              # --split dev to tune; --dump PATH for the per-case lines",
    "kbbot eval all                               # = make bench; writes this file",
]
TARGETS = {"scifact": 0.74, "cranfield": 0.43, "cisi": 0.46}


def machine() -> str:
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    import torch

    return (
        f"{os.cpu_count()} CPU cores, {mem} RAM, {platform.machine()}, Python {platform.python_version()}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), no GPU"
    )


def run_all(ws: EvalWorkspace, output: Path | None = None, ingest_sample: int = 500, fresh: bool = False) -> dict:
    from bot.eval.abstention import eval_abstention
    from bot.eval.company import eval_company
    from bot.eval.multiturn import eval_multiturn
    from bot.eval.retrieval import eval_retrieval
    from bot.eval.routing import eval_routing

    started = time.time()
    # What computed the vectors (e.g. all-MiniLM-L6-v2@openvino-f32: the runtime, and bfloat16 or not on this CPU).
    results: dict = {"retrieval": {}, "vector_source": ws.embedder.vector_source}
    for name in RETRIEVAL_DATASETS:
        sample = ingest_sample if name == "scifact" else 0
        results["retrieval"][name] = eval_retrieval(ws, resolve(name), "test", ingest_sample=sample, fresh=fresh)
    # The ingest-speed comparison (SciFact sample, bare torch encodes in the same run) at the top level too.
    results["ingest"] = results["retrieval"]["scifact"].get("ingest") or {}
    results["routing"] = eval_routing(ws, list(RETRIEVAL_DATASETS), "test", fresh)
    results["abstention"] = eval_abstention(ws, "squad2-sample", fresh=fresh)
    results["multiturn"] = eval_multiturn(ws, "mtrag-un", "canard-dev", fresh=fresh)
    results["company"] = eval_company(ws, "all", fresh=fresh)  # both splits in one pass; goals are on test
    results["elapsed_s"] = round(time.time() - started, 1)
    results["markdown"] = render(results)
    path = output or REPO_ROOT / "docs" / "benchmarks.md"
    write_report(path, results["markdown"])
    results["report"] = str(path)
    return results


def write_report(path: Path, generated: str) -> None:
    kept = ""
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        if END_MARKER in text:
            kept = text.split(END_MARKER, 1)[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{generated.rstrip()}\n\n{END_MARKER}\n{kept.lstrip(chr(10))}", encoding="utf-8")


def _targets(results: dict) -> list[str]:
    rows = ["| metric | target | kbbot (measured) | met? |", "|---|---|---:|---|"]

    def row(metric: str, target: str, value: float | None, ok: bool | None, fmt: str = "{:.3f}") -> None:
        shown = "n/a" if value is None else fmt.format(value)
        rows.append(f"| {metric} | {target} | {shown} | {'—' if ok is None else ('yes' if ok else '**no**')} |")

    retrieval = results["retrieval"]
    for name, target in TARGETS.items():
        if name in retrieval:
            v = retrieval[name]["systems"]["kbbot"]["ndcg@10"]
            row(f"{name} nDCG@10 (test)", f"≥ {target}", v, v >= target)
    routing = results.get("routing")
    if routing:
        v = routing["top1_accuracy"]
        row("routing top-1, SciFact/Cranfield/CISI", "≥ 0.995", v, v >= 0.995)
        loo = routing["leave_one_out"]
        rows.append(
            f"| out-of-KB → insufficient context / in-KB answered (leave one out, one setting) | ≥ 0.97 / ≥ 0.97 | "
            f"{loo['refused_rate']:.3f} / {loo['in_kb_answered_rate']:.3f} | "
            f"{'yes' if loo['refused_rate'] >= 0.97 and loo['in_kb_answered_rate'] >= 0.97 else '**no**'} |"
        )
    mt = results.get("multiturn")
    if mt:
        v = mt["variants"]["condensed"]["routing_accuracy"]
        row("routing top-1, MTRAG-UN, condensed query", "≥ 0.97", v, v >= 0.97)
        ratio = mt.get("condensed_vs_raw_recall")
        row("MTRAG-UN recall@5 condensed / raw", "≥ 1.3×", ratio, None if ratio is None else ratio >= 1.3, "{:.2f}×")
    company = results.get("company")
    if company:
        from bot.eval.company import goal_rows

        for name, target, value in goal_rows(company):
            met = None if value is None else value >= target
            row(f"company questions (test split): {name}", f"≥ {target:.2f}", value, met)
    sci = retrieval.get("scifact")
    if sci:
        ing = sci.get("ingest") or {}
        if "ratio_vs_bare_docs" in ing:
            v = ing["ratio_vs_bare_docs"]
            row("ingest time / bare encode of the same documents", "≤ 1.0×", v, v <= 1.0, "{:.2f}×")
        if "ratio_vs_bare_chunks" in ing:
            v = ing["ratio_vs_bare_chunks"]
            row("ingest time / bare encode of kbbot's chunk texts", "≤ 1.0×", v, v <= 1.0, "{:.2f}×")
        v = sci["systems"]["kbbot"]["p95_ms"]
        row("warm query p95, 5k-doc SciFact KB", "≤ 150 ms", v, v <= 150, "{:.0f} ms")
    return rows


def render(results: dict) -> str:
    from bot.eval.abstention import format_abstention
    from bot.eval.company import format_company
    from bot.eval.multiturn import format_multiturn
    from bot.eval.retrieval import format_ingest, format_table
    from bot.eval.routing import format_routing

    out = [
        "# kbbot benchmarks",
        "",
        f"Generated by `kbbot eval all` (`make bench`) on {time.strftime('%Y-%m-%d %H:%M %Z')}, "
        f"in {results.get('elapsed_s', 0) / 60:.0f} min.",
        f"Machine: {machine()}. Offline mode (local {results.get('vector_source', 'all-MiniLM-L6-v2')}, no LLM key) "
        "unless a row says otherwise.",
        "",
        "Commands (each also takes `--json`; datasets are read from `../shared/datasets`):",
        "",
        "```",
        *COMMANDS,
        "```",
        "",
        "## Targets",
        "",
        *_targets(results),
        "",
        "## Retrieval (BEIR layout, test split; kbbot = hybrid search as the engine uses it, "
        "baselines in the same run)",
        "",
    ]
    for name, r in results["retrieval"].items():
        out += [
            f"### {name} ({r['queries']} queries, {r['documents']} docs → {r['chunks']} kbbot chunks)",
            "",
            format_table(r),
            "",
            format_ingest(r),
            "",
        ]
        out += [f"- {note}" for note in r.get("notes", [])]
        out.append("")
    if "routing" in results:
        out += ["## Routing (real engine, offline router)", "", format_routing(results["routing"]), ""]
    if "abstention" in results:
        out += ["## Abstention (SQuAD 2.0 sample)", "", format_abstention(results["abstention"]), ""]
    if "multiturn" in results:
        out += ["## Multi-turn (MTRAG-UN, CANARD)", "", format_multiturn(results["multiturn"]), ""]
    if "company" in results:
        out += [
            "## Company questions (the sample KBs, asked as colleagues ask in Slack)",
            "",
            format_company(results["company"]),
            "",
        ]
    return "\n".join(out)
