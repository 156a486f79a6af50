"""`kbbot serve`: Socket Mode when SLACK_APP_TOKEN is set, else HTTP on PORT at /slack/events.

The HTTP server is a small threaded `http.server` in front of `App.dispatch` (Bolt's own development
server is single-threaded): Bolt verifies the signature and timestamp, acks, and the work runs on the
work pools (bot/slack/work.py), so the HTTP response goes back in milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from slack_bolt import App, BoltRequest
from slack_sdk import WebClient

from bot.config import Settings
from bot.core import USER_ERRORS, KnowledgeBot
from bot.slack.deps import SlackDeps

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
MAX_BODY_BYTES = 2 * 1024 * 1024  # Slack payloads are small; refuse anything silly


class BoltHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the default backlog (5) resets connections under a burst of events


def make_http_server(app: App, host: str = "0.0.0.0", port: int = 3000, path: str = EVENTS_PATH) -> BoltHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "kbbot"

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
            log.debug("%s %s", self.address_string(), format % args)

        def _send(self, status: int, body: str = "", headers: dict | None = None) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            for key, values in (headers or {}).items():
                for value in values if isinstance(values, (list, tuple)) else [values]:
                    if key.lower() != "content-length":
                        self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.partition("?")[0] in ("/healthz", "/health"):
                self._send(200, "ok", {"Content-Type": "text/plain"})
            else:
                self._send(404, "not found")

        def do_POST(self) -> None:  # noqa: N802
            request_path, _, query = self.path.partition("?")
            if request_path != path:
                self._send(404, "not found")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                self._send(413, "payload too large")
                self.close_connection = True
                return
            body = self.rfile.read(length).decode("utf-8", errors="replace")
            headers: dict[str, list[str]] = {}
            for key, value in self.headers.items():
                headers.setdefault(key.lower(), []).append(value)
            response = app.dispatch(BoltRequest(body=body, query=query, headers=headers))
            payload = response.body if isinstance(response.body, str) else json.dumps(response.body)
            self._send(response.status, payload, response.headers)

    return BoltHTTPServer((host, port), Handler)


def serve(settings: Settings, host: str = "0.0.0.0", port: int | None = None) -> int:
    from bot.slack.app import SlackConfigError, build_slack

    app_token = settings.slack_app_token.get_secret_value().strip() if settings.slack_app_token else ""
    socket_mode = bool(app_token)
    if not settings.slack_enabled:
        raise SlackConfigError("SLACK_BOT_TOKEN is not set; see 'Slack app setup' in README.md")
    app, deps = build_slack(settings, socket_mode=socket_mode)
    deps.start_threads()  # not one by one under the first burst of events
    deps.bot.open_store()  # this process owns the embedded store from now on (or stops here, saying who does)
    deps.bot.refresh()  # logs every kb.toml that cannot be read (its KB keeps its last known rules)
    if settings.answer_processes:  # started now, warming up in the background (each loads the model)
        from bot.core.answer_processes import AnswerProcesses

        deps.answerer = AnswerProcesses(
            deps.bot, settings.answer_processes, settings.slack_workers, warm=settings.slack_warmup
        ).start()
    threading.Thread(
        target=_start_up, args=(deps, app.client, settings.slack_warmup), name="kbbot-start", daemon=True
    ).start()
    stop = threading.Event()
    with contextlib.suppress(ValueError):  # only possible in the main thread
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if socket_mode:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        print("kbbot: connecting to Slack in Socket Mode", file=sys.stderr)
        handler = SocketModeHandler(app, app_token)
        handler.connect()
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
        finally:
            handler.close()
            _drain(deps, settings.shutdown_grace_s)
        return 0
    server = make_http_server(app, host, port or settings.port)
    bound_host, bound_port = server.server_address[:2]
    print(f"kbbot: listening for Slack on http://{bound_host}:{bound_port}{EVENTS_PATH}", file=sys.stderr)
    threading.Thread(target=lambda: (stop.wait(), server.shutdown()), name="kbbot-stop", daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        _drain(deps, settings.shutdown_grace_s)
    return 0


def _start_up(deps: SlackDeps, client: WebClient, warm: bool) -> None:
    """Load the model and indexes (unless KBBOT_SLACK_WARMUP=off), then answer what an earlier run left."""
    from bot.slack.resume import resume_held

    if warm and deps.answerer is None:  # answering processes warm themselves up
        _warm_up(deps.bot)
    try:
        resume_held(deps, client)
    except Exception:
        log.exception("could not resume the questions of the previous run")


def _drain(deps: SlackDeps, grace_s: float) -> None:
    """Stopping: new events are no longer received; the questions already claimed are answered (for at most
    grace_s; any left are answered at the next start)."""
    pending = deps.answers.pending + deps.ingests.pending
    if pending:
        print(f"kbbot: stopping — finishing {pending} task(s) (up to {grace_s:g} s)", file=sys.stderr)
    if not deps.shutdown(timeout_s=grace_s):
        print("kbbot: stopped with work unfinished; claimed questions are answered at the next start", file=sys.stderr)


def _warm_up(bot: KnowledgeBot) -> None:
    """Load the embedding model and indexes before the first question arrives. Not the chunker: importing it
    holds the interpreter lock for seconds, which the first questions after a start would wait for."""
    try:
        bot.warm_up()
    except Exception as exc:
        log.info("warm-up skipped: %s", exc)


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from bot.slack.app import SlackConfigError

    logging.getLogger("slack_sdk").setLevel(max(logging.INFO, logging.getLogger().level))
    try:
        return serve(settings, host=getattr(args, "host", "0.0.0.0"), port=getattr(args, "port", None))
    except (SlackConfigError, *USER_ERRORS) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
