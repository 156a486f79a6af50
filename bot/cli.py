"""`kbbot` command line: ingest and manage knowledge bases, ask, chat, serve, eval."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from bot.config import Settings, describe_settings_error, load_settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A problem to report in one line, with a non-zero exit and no traceback."""


def _print_json(payload: object) -> None:
    print(json.dumps(payload, ensure_ascii=False, indent=None))


def _bot(settings: Settings):
    from bot.core import KnowledgeBot

    return KnowledgeBot(settings)


def _cli():
    from bot.core import Origin

    return Origin.cli()


# --- kb / ingest ------------------------------------------------------------------------------


def _print_report(report, as_json: bool) -> None:
    if as_json:
        _print_json(report.to_json())
        return
    marks = {"ready": "✓", "unchanged": "=", "failed": "✗", "skipped": "-", "removed": "−", "missing": "?"}
    for doc in report.documents:
        detail = f"{doc.chunks} chunks" if doc.status == "ready" else (doc.error or doc.reason or doc.status)
        if doc.status in ("skipped", "removed", "missing"):
            detail = f"{doc.status}: {detail}"
        print(f"  {marks.get(doc.status, '·')} {report.kb}/{doc.document}: {detail}")
    count = {s: sum(d.status == s for d in report.documents) for s in marks}
    ok = count["ready"] + count["unchanged"]
    extra = "".join(f", {count[s]} {s}" for s in ("skipped", "removed", "missing") if count[s])
    print(f"{report.kb}: {ok} ok, {count['failed']} failed{extra}, {report.embedded_chunks} chunks embedded")


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    with _bot(settings) as bot:  # closed at once: the embedded store is free for the next process
        report = bot.ingest_paths(_cli(), args.kb, [Path(p) for p in args.paths], progress=not args.json)
    _print_report(report, args.json)
    if not args.json:
        for doc in report.documents:
            if doc.status == "failed":
                print(f"error: {doc.error}", file=sys.stderr)
    return EXIT_OK if report.ok else EXIT_FAILED


def cmd_kb_list(args: argparse.Namespace, settings: Settings) -> int:
    with _bot(settings) as bot:
        summaries = bot.summaries(_cli())
    if args.json:
        _print_json([s.to_json() for s in summaries])
        return EXIT_OK
    if not summaries:
        print("No knowledge bases yet. Create one with `kbbot kb create NAME --description TEXT`.")
    for s in summaries:
        access = {"public": "", "restricted": " · restricted"}.get(s.visibility or "", " · command line only")
        print(
            f"{s.name}: {s.ready_documents}/{s.documents} documents ready, {s.chunks} chunks{access} — {s.description}"
        )
        if s.channels:
            print(f"  searched first in: {', '.join(s.channels)}")
        if s.problem:
            print(f"  ! {s.problem}")
    return EXIT_OK


def cmd_kb_create(args: argparse.Namespace, settings: Settings) -> int:
    with _bot(settings) as bot:
        bot.create_kb(
            _cli(),
            args.name,
            args.description,
            restricted=args.restricted,
            allowed_channels=args.allowed_channel,
            channels=args.channel,
            uploaders=args.uploader,
        )
        print(f"created knowledge base {args.name!r} ({'restricted' if args.restricted else 'public'})")
    return EXIT_OK


def cmd_kb_sync(args: argparse.Namespace, settings: Settings) -> int:
    with _bot(settings) as bot:
        reports = bot.sync(_cli(), progress=not args.json, keep_missing=args.keep_missing)
    if args.json:
        _print_json(
            {
                "kbs": [r.to_json() for r in reports],
                "embedded_chunks": sum(r.embedded_chunks for r in reports),
            }
        )
    else:
        for report in reports:
            _print_report(report, False)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILED


def cmd_kb_delete_doc(args: argparse.Namespace, settings: Settings) -> int:
    with _bot(settings) as bot:
        bot.delete_document(_cli(), args.kb, args.document)
    print(f"deleted {args.kb}/{args.document}")
    return EXIT_OK


def cmd_kb_reindex(args: argparse.Namespace, settings: Settings) -> int:
    with _bot(settings) as bot:
        count = bot.reindex(_cli(), args.name, progress=True)
    print(f"re-embedded {count} chunks of {args.name!r}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    """The knowledge gaps App Home shows uploaders: refused and 👎 questions, most frequent first."""
    if not 1 <= args.days <= 3650:
        raise CliError(f"--days must be between 1 and 3650, not {args.days}")
    with _bot(settings) as bot:
        report = bot.knowledge_gaps(_cli(), days=args.days, kb=args.kb, limit=args.limit)
    if args.json:
        _print_json(report.to_json())
        return EXIT_OK
    print(format_gaps(report))
    return EXIT_OK


def format_gaps(report, now: float | None = None) -> str:
    import time

    from bot.core import FEEDBACK_REASONS

    now = time.time() if now is None else now
    scope = ", ".join(report.kbs) or "no knowledge bases"
    lines = [f"Knowledge gaps — last {report.days} days ({scope}): {report.total} found"]
    if not report.gaps:
        lines.append(f"  No refused questions or 👎 answers in the last {report.days} days.")
    for n, gap in enumerate(report.gaps, 1):
        counts = []
        if gap.refused:
            counts.append(f"refused {gap.refused}×")
        if gap.disliked:
            reasons = ", ".join(f"{FEEDBACK_REASONS[r].lower()} {k}" for r, k in gap.reasons.items())
            counts.append(f"👎 {gap.disliked}×" + (f" ({reasons})" if reasons else ""))
        days = int(now // 86400) - int(gap.last_at // 86400)
        last = "today" if days <= 0 else "yesterday" if days == 1 else f"{days} days ago"
        when = time.strftime("%Y-%m-%d", time.gmtime(gap.last_at))
        lines.append(f"{n:3}. {gap.question}")
        lines.append(f"     {' · '.join(counts)} · last asked {last} ({when}) · {', '.join(gap.kbs)}")
        lines += [f"     > {' '.join(c.split())}" for c in gap.comments]
    if report.total > len(report.gaps):
        lines.append(f"…and {report.total - len(report.gaps)} more (--limit N shows more)")
    return "\n".join(lines)


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from bot.slack.server import cmd_serve as serve  # slack-bolt loads only for `serve`

    return serve(args, settings)


def cmd_start(args: argparse.Namespace, settings: Settings) -> int:
    """What `make run` starts: the Slack bot when Slack tokens are set, otherwise the console chat; with
    `--sync`, after syncing the declared KBs in this same process (a second process would import everything
    and, when documents changed, load the embedding model again)."""
    if args.sync and cmd_kb_sync(argparse.Namespace(json=False, keep_missing=False), settings) != EXIT_OK:
        print("warning: some documents could not be ingested (see above); starting without them", file=sys.stderr)
    if settings.slack_enabled:
        return cmd_serve(argparse.Namespace(host="0.0.0.0", port=None), settings)
    print("No SLACK_BOT_TOKEN set: starting the local console chat (see README to connect Slack).")
    from bot.console import cmd_chat

    return cmd_chat(argparse.Namespace(kb=None), settings)


# --- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbbot", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    commands = parser.add_subparsers(dest="command", required=True)

    ingest = commands.add_parser("ingest", help="ingest files or folders into a knowledge base")
    ingest.add_argument("--kb", required=True)
    ingest.add_argument("paths", nargs="+")
    ingest.add_argument("--json", action="store_true")
    ingest.set_defaults(handler=cmd_ingest)

    kb = commands.add_parser("kb", help="manage knowledge bases").add_subparsers(dest="kb_command", required=True)
    kb_list = kb.add_parser("list", help="list knowledge bases")
    kb_list.add_argument("--json", action="store_true")
    kb_list.set_defaults(handler=cmd_kb_list)
    kb_create = kb.add_parser("create", help="create an (undeclared) knowledge base")
    kb_create.add_argument("name")
    kb_create.add_argument("--description", required=True)
    kb_create.add_argument("--restricted", action="store_true", help="searched and cited only in --allowed-channel")
    kb_create.add_argument("--allowed-channel", action="append", default=[], metavar="CHANNEL_ID")
    kb_create.add_argument("--channel", action="append", default=[], metavar="CHANNEL_ID", help="searched first here")
    kb_create.add_argument("--uploader", action="append", default=[], metavar="USER_ID")
    kb_create.set_defaults(handler=cmd_kb_create)
    kb_sync = kb.add_parser("sync", help="ingest every declared knowledge base's docs/ folder")
    kb_sync.add_argument("--json", action="store_true")
    kb_sync.add_argument(
        "--keep-missing", action="store_true", help="keep documents whose file left docs/ (default: remove them)"
    )
    kb_sync.set_defaults(handler=cmd_kb_sync)
    kb_delete = kb.add_parser("delete-doc", help="delete a document from a knowledge base")
    kb_delete.add_argument("--kb", required=True)
    kb_delete.add_argument("document")
    kb_delete.set_defaults(handler=cmd_kb_delete_doc)
    kb_reindex = kb.add_parser("reindex", help="re-embed a knowledge base with the configured model")
    kb_reindex.add_argument("name")
    kb_reindex.set_defaults(handler=cmd_kb_reindex)

    report = commands.add_parser(
        "report", help="knowledge gaps: the most frequent refused and 👎 questions (what App Home shows uploaders)"
    )
    report.add_argument("--days", type=int, default=30, help="look back this many days (default 30)")
    report.add_argument("--kb", default=None, help="only this knowledge base")
    report.add_argument("--limit", type=int, default=50, help="gaps shown (default 50)")
    report.add_argument("--json", action="store_true")
    report.set_defaults(handler=cmd_report)

    serve = commands.add_parser("serve", help="run the Slack bot (Socket Mode with SLACK_APP_TOKEN, else HTTP on PORT)")
    serve.add_argument("--host", default="0.0.0.0", help="HTTP mode: interface to listen on")
    serve.add_argument("--port", type=int, default=None, help="HTTP mode: port (default: PORT or 3000)")
    serve.set_defaults(handler=cmd_serve)

    from bot.console import add_parsers as add_console_parsers  # ask, chat

    add_console_parsers(commands)
    start = commands.add_parser("start", help="the Slack bot if Slack tokens are set, else the console chat")
    start.add_argument("--sync", action="store_true", help="first ingest the declared knowledge bases (kb sync)")
    start.set_defaults(handler=cmd_start)

    from bot.eval.cli import add_parser as add_eval_parser  # argparse only; the harness loads lazily

    add_eval_parser(commands)

    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from bot.console import InputError
    from bot.core import USER_ERRORS

    try:
        settings = load_settings()
    except ValidationError as exc:
        print(f"error: {describe_settings_error(exc)}", file=sys.stderr)
        return EXIT_FAILED
    try:
        return args.handler(args, settings)
    except (CliError, InputError, *USER_ERRORS) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
