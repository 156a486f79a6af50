"""`kbbot eval …` sub-commands. Only argparse is imported here; the harness loads when a command runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(commands) -> None:
    ev = commands.add_parser("eval", help="benchmarks: retrieval, routing, abstention, multiturn, company, scale, all")
    sub = ev.add_subparsers(dest="eval_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print one JSON object (no progress)")
        p.add_argument(
            "--data-dir",
            type=Path,
            default=None,
            help="where benchmark KBs and the embedding cache live (default: $KBBOT_DATA_DIR/eval)",
        )
        p.add_argument("--no-cache", action="store_true", help="do not use the corpus embedding cache")
        p.add_argument("--fresh", action="store_true", help="rebuild benchmark KBs even if unchanged")

    r = sub.add_parser("retrieval", help="kbbot vs bm25 / dense / llama-index on a BEIR-layout dataset")
    r.add_argument("--dataset", required=True, help="a folder in BEIR layout, or a name under ../shared/datasets")
    r.add_argument("--split", default="test")
    r.add_argument("--systems", default="kbbot,bm25,dense,llamaindex")
    r.add_argument(
        "--ingest-sample", type=int, default=500, help="documents for the uncached ingest-speed comparison (0: skip)"
    )
    common(r)

    ro = sub.add_parser("routing", help="router top-1 accuracy, confusion matrix, leave-one-out refusals")
    ro.add_argument("--datasets", default="scifact,cranfield,cisi")
    ro.add_argument("--split", default="test")
    common(ro)

    a = sub.add_parser("abstention", help="answered / abstained on SQuAD 2.0 answerable and unanswerable questions")
    a.add_argument("--dataset", default="squad2-sample")
    a.add_argument("--limit", type=int, default=0, help="only the first N questions (0: all)")
    common(a)

    m = sub.add_parser("multiturn", help="recall@5 and routing for raw / condensed / whole-conversation queries")
    m.add_argument("--dataset", default="mtrag-un")
    m.add_argument("--canard", default="canard-dev", help="CANARD rewrites for the condenser's token F1 ('' to skip)")
    m.add_argument("--limit", type=int, default=0, help="an evenly spread sample of N tasks (0: all)")
    m.add_argument("--canard-limit", type=int, default=0, help="an evenly spread sample of N CANARD rows (0: all)")
    common(m)

    co = sub.add_parser("company", help="everyday Slack questions, threads, Chinese and out-of-KB on the sample KBs")
    co.add_argument("--split", default="test", choices=("dev", "test", "all"), help="tune on dev; report test")
    co.add_argument("--dump", type=Path, default=None, help="per-case JSON lines (default: DATA/company-SPLIT.jsonl)")
    co.add_argument("--limit", type=int, default=0, help="an evenly spread sample of N cases (0: all)")
    co.add_argument(
        "--questions", type=Path, default=None, help="a folder of *.jsonl cases (default: benchmarks/company/questions)"
    )
    common(co)

    sc = sub.add_parser(
        "scale",
        help="search/ask latency, RSS, disk, cold start and publish time at 100k-1M chunks "
        "(not part of `eval all`: a 100k build takes tens of minutes)",
        description="Builds KBs of N chunks (real documents of the datasets plus recombined variants with "
        "synthesised near-real vectors, docs/benchmarks.md) and measures them in a fresh process. Not part of "
        "`kbbot eval all` because of its run time.",
    )
    sc.add_argument("--sizes", default="100000", help="comma-separated chunk counts, e.g. 100000,1000000")
    sc.add_argument("--store", default="embedded", help="embedded, server (a local `chroma run`) or both")
    sc.add_argument("--datasets", default="scifact,cranfield,cisi,squad2-sample,mtrag-un")
    sc.add_argument("--queries", type=int, default=40, help="questions for the search and ask percentiles")
    sc.add_argument("--pool-docs", type=int, default=0, help="real documents ingested first (0: a tenth of N)")
    sc.add_argument(
        "--serve-embedded-build",
        action="store_true",
        help="server mode: serve the embedded build's Chroma directory with `chroma run` instead of building again",
    )
    common(sc)

    al = sub.add_parser("all", help="every benchmark; writes docs/benchmarks.md (what `make bench` runs)")
    al.add_argument("--output", type=Path, default=None, help="markdown report (default: docs/benchmarks.md)")
    al.add_argument("--ingest-sample", type=int, default=500)
    common(al)
    ev.set_defaults(handler=handle)


def handle(args: argparse.Namespace, settings) -> int:
    from bot.eval.datasets import DatasetError

    try:
        return _run(args, settings)
    except DatasetError as exc:  # a missing or malformed dataset: say which file and why, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, settings) -> int:
    from bot.eval.workspace import EvalWorkspace

    ws = EvalWorkspace(settings, args.data_dir, use_cache=not args.no_cache, progress=not args.json)
    command = args.eval_command
    if command == "retrieval":
        from bot.eval.datasets import resolve
        from bot.eval.retrieval import eval_retrieval, format_ingest, format_table

        systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
        result = eval_retrieval(ws, resolve(args.dataset), args.split, systems, args.ingest_sample, args.fresh)
        return _emit(
            args,
            result,
            lambda r: (
                f"{r['dataset']} ({r['split']}, {r['queries']} queries, "
                f"{r['documents']} docs, {r['chunks']} chunks)\n{format_table(r)}\n{format_ingest(r)}"
            ),
        )
    if command == "routing":
        from bot.eval.routing import eval_routing, format_routing

        names = [s.strip() for s in args.datasets.split(",") if s.strip()]
        return _emit(args, eval_routing(ws, names, args.split, args.fresh), format_routing)
    if command == "abstention":
        from bot.eval.abstention import eval_abstention, format_abstention

        return _emit(args, eval_abstention(ws, args.dataset, args.limit, args.fresh), format_abstention)
    if command == "multiturn":
        from bot.eval.multiturn import eval_multiturn, format_multiturn

        return _emit(
            args,
            eval_multiturn(ws, args.dataset, args.canard, args.limit, args.fresh, args.canard_limit),
            format_multiturn,
        )
    if command == "company":
        from bot.eval.company import QUESTIONS_DIR, eval_company, format_company

        result = eval_company(ws, args.split, args.limit, args.fresh, args.dump, args.questions or QUESTIONS_DIR)
        return _emit(args, result, format_company)

    if command == "scale":
        from bot.eval.scale import eval_scale, format_scale

        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
        stores = ["embedded", "server"] if args.store == "both" else [s.strip() for s in args.store.split(",")]
        if not sizes or any(n < 100 for n in sizes) or any(s not in ("embedded", "server") for s in stores):
            message = "eval scale: --sizes takes chunk counts of at least 100; --store embedded|server|both"
            print(message, file=sys.stderr)
            return 2
        datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
        result = eval_scale(
            ws, sizes, stores, datasets, args.queries, args.pool_docs, args.fresh, args.serve_embedded_build
        )
        return _emit(args, result, format_scale)
    if command == "all":
        from bot.eval.report import run_all

        return _emit(args, run_all(ws, args.output, args.ingest_sample, args.fresh), lambda r: r["markdown"])
    raise AssertionError(command)


def _emit(args: argparse.Namespace, result: dict, render) -> int:
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "markdown"}, ensure_ascii=False))
    else:
        print(render(result))
    sys.stdout.flush()
    return 0
