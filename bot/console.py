"""`kbbot ask`, `kbbot chat` and `kbbot start`: the engine on the command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from bot.config import Settings
from bot.core import USER_ERRORS, Answer, Citation, EmptyQuestion, KnowledgeBot, NotFound, Origin, Turn

CHAT_HELP = """Commands: /trace (rounds of the last answer), /kb NAME (pin a knowledge base), /kb (unpin),
/kbs (list knowledge bases), /new (forget the conversation), /quit (or quit, Ctrl-D).
Anything else is a question."""
QUIT_WORDS = ("/quit", "/exit", "quit", "exit")

log = logging.getLogger(__name__)


class InputError(ValueError):
    """A malformed --history or --questions file; the message names it."""


def load_history(path: str | None) -> list[Turn]:
    if path is None:
        return []
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError("expected a JSON list of {role, text}")
        return [Turn.from_json(item) for item in data]
    except (OSError, ValueError, AttributeError) as exc:
        raise InputError(f"{path}: {exc}") from exc


def load_questions(path: str) -> list[dict]:
    rows = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{path}: {exc}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row.get("question"), str):
                raise ValueError('each line needs a "question" (a string)')
            history = row.get("history") or []
            if not isinstance(history, list):
                raise ValueError('"history" must be a JSON list of {role, text}')
            if row.get("kb") is not None and not isinstance(row["kb"], str):
                raise ValueError('"kb" must be a knowledge base name')
            row["history"] = [Turn.from_json(t) for t in history]
        except ValueError as exc:
            raise InputError(f"{path}:{number}: {exc}") from exc
        rows.append(row)
    return rows


def trust_note(citation: Citation) -> str:
    """' (updated 2026-03-14, uploaded by U…, possibly outdated)' — what Slack's Sources show, in words."""
    parts = []
    if isinstance(citation.updated_at, (int, float)):
        parts.append(f"updated {datetime.fromtimestamp(citation.updated_at, UTC):%Y-%m-%d}")
    if citation.uploaded_by:
        parts.append(f"uploaded by {citation.uploaded_by}")
    if citation.stale:
        parts.append("possibly outdated")
    return f" ({', '.join(parts)})" if parts else ""


def render_text(answer: Answer) -> str:
    lines = [answer.answer]
    if answer.citations:
        lines += ["", "Sources:"]
        for c in answer.citations:
            where = f", {c.location}" if c.location else ""
            lines.append(f"  [{c.n}] {c.kb}/{c.document}{where}{trust_note(c)} — “{c.excerpt}”")
    kbs = list(dict.fromkeys(c.kb for c in answer.citations)) or answer.searched_kbs or answer.route.kbs
    context = f"{', '.join(kbs) or 'no KB'} · {len(answer.rounds)} round(s) · {answer.mode}"
    lines += ["", f"({context}; {answer.timings_ms.get('total', 0):.0f} ms)"]
    if answer.notes:
        lines.append("(" + "; ".join(answer.notes) + ")")
    return "\n".join(lines)


def render_trace(answer: Answer) -> str:
    lines = [f"standalone query: {answer.standalone_query}", f"route: {answer.route.kbs} {answer.route.scores}"]
    for i, r in enumerate(answer.rounds, start=1):
        verdict = "sufficient" if r.sufficient else "insufficient"
        lines.append(f"round {i} [{r.policy}] {r.kbs} “{r.query}” → {verdict}: {r.reason}")
    lines.append(f"timings: {answer.timings_ms}")
    return "\n".join(lines)


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    # Input first: a malformed file is reported before the engine (seconds of imports) loads.
    if args.questions:
        rows = load_questions(args.questions)
    else:
        if not args.question:
            raise InputError("give a QUESTION or --questions FILE")
        history = load_history(args.history)

    bot, origin = KnowledgeBot(settings), Origin.cli()
    if args.questions:
        failures = 0
        for row in rows:
            try:
                answer = bot.ask(origin, row["question"], row["history"], kb=row.get("kb") or args.kb).answer
            except USER_ERRORS as exc:  # this line fails; the others still run
                failures += 1
                print(json.dumps({"question": row["question"], "error": str(exc)}) if args.json else f"error: {exc}")
                continue
            print(
                json.dumps(answer.to_json(), ensure_ascii=False) if args.json else render_text(answer) + "\n",
                flush=True,
            )
        return 1 if failures else 0

    try:
        answer = bot.ask(origin, args.question, history, kb=args.kb).answer
    except EmptyQuestion as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(answer.to_json(), ensure_ascii=False, indent=2) if args.json else render_text(answer))
    return 0


class WarmUp:
    """The embedding model and the indexes load on a thread while the prompt is shown (seconds of imports and
    reading); the first question waits for them, saying so."""

    def __init__(self, bot: KnowledgeBot):
        self._thread = threading.Thread(target=self._run, args=(bot,), name="kbbot-warm-up", daemon=True)
        self._thread.start()

    @staticmethod
    def _run(bot: KnowledgeBot) -> None:
        try:
            bot.warm_up()
        except Exception as exc:  # the first question meets the same problem and reports it
            log.info("warm-up stopped: %s", exc)

    def wait(self) -> None:
        if not self._thread.is_alive():
            return
        started = time.monotonic()
        print("(loading the model and the knowledge bases…)", flush=True)
        self._thread.join()
        log.info("the first question waited %.1f s for the warm-up", time.monotonic() - started)


def cmd_chat(args: argparse.Namespace, settings: Settings) -> int:
    bot, origin = KnowledgeBot(settings), Origin.cli()
    bot.open_store()  # this process owns the embedded store now, or stops here saying which process does
    for problem in bot.refresh():
        print(f"warning: {problem}")
    kbs = [v.name for v in bot.visible_kbs(origin) if v.ready_documents]
    warm_up = WarmUp(bot) if kbs else None
    print(f"kbbot chat — {bot.mode} mode, knowledge bases: {', '.join(kbs) or 'none (run `kbbot kb sync`)'}")
    print(CHAT_HELP)
    history: list[Turn] = []
    pinned: str | None = args.kb
    last: Answer | None = None
    while True:
        try:
            line = input(f"\nyou{f' [{pinned}]' if pinned else ''}> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if not line:
            continue
        if line.lower() in QUIT_WORDS:
            return 0
        if line == "/trace":
            print(render_trace(last) if last else "no answer yet")
            continue
        if line == "/new":
            history, last = [], None
            print("(conversation cleared)")
            continue
        if line == "/kbs":
            for view in bot.visible_kbs(origin):
                print(f"  {view.name}: {view.ready_documents} documents — {view.description[:90]}")
            continue
        if line.startswith("/kb"):
            name = line[3:].strip() or None
            if name and name not in kbs:
                print(f"no knowledge base {name!r}; known: {', '.join(kbs)}")
                continue
            pinned = name
            print(f"(pinned to {name})" if name else "(searching every knowledge base)")
            continue
        if line.startswith("/"):
            print(CHAT_HELP)
            continue
        if warm_up is not None:
            warm_up.wait()
            warm_up = None
        try:
            last = bot.ask(origin, line, history, kb=pinned).answer
        except (EmptyQuestion, NotFound) as exc:
            print(exc)
            continue
        print("\nkbbot> " + render_text(last))
        history += [Turn("user", line), Turn("assistant", last.answer)]


def add_parsers(commands: argparse._SubParsersAction) -> None:
    ask = commands.add_parser("ask", help="answer one question (or a file of them) from the knowledge bases")
    ask.add_argument("question", nargs="?")
    ask.add_argument("--kb", help="search only this knowledge base")
    ask.add_argument("--history", help="JSON file: a list of {role: user|assistant, text}")
    ask.add_argument("--questions", help="JSON lines file of {question, history?, kb?}: one Answer per line")
    ask.add_argument("--json", action="store_true")
    ask.set_defaults(handler=cmd_ask)

    chat = commands.add_parser("chat", help="interactive multi-turn console over the knowledge bases")
    chat.add_argument("--kb", help="pin a knowledge base")
    chat.set_defaults(handler=cmd_chat)
