"""A fake OpenAI-compatible chat API on 127.0.0.1, scripted per test, recording every request.

kbbot's LLM client is the real `openai` package (openai 3.x speaks httpx2, which httpx mocks don't
intercept), so LLM mode is tested against a real HTTP server: `POST /v1/chat/completions` only.

What it answers is up to the test:

- `fake.enqueue(reply, ...)`: replies served in order, one per request (first in, first out);
- `fake.handler = fn`: `fn(request) -> Reply` for requests when the queue is empty.

With neither, a request gets HTTP 500 (and the test sees the engine's offline fallback).

A handler that raises (a failing assert in a script, a bug in it) is a failure of the test, not a
fault of the "server": the request gets HTTP 400 (not retried, so the engine goes offline at once),
the exception is kept, and `check()` — called by the `fake_llm` fixtures after every test — raises
it. Without that, the engine's fallback would turn a broken script into a passing test.

Replies are `Reply(status, headers, body)`; `chat(text)` builds a chat.completion body, `reply(...)`
wraps a status/headers/body. `kind_of(request)` tells which of kbbot's calls a request is
("CondensedQuery", "RouteChoice", "GradeVerdict" — the json_schema names — or "answer" for the plain
text call), so a handler can play each part of the pipeline.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "sk-test-not-a-real-key"


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # dict/list → JSON; str/bytes → sent as is


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict
    at: float

    @property
    def kind(self) -> str:
        return kind_of(self)

    @property
    def messages(self) -> list[dict]:
        return list(self.body.get("messages") or [])

    def message(self, role: str) -> str:
        """The content of the first message with this role ("" if none)."""
        return next((str(m.get("content") or "") for m in self.messages if m.get("role") == role), "")


def kind_of(request: Request) -> str:
    fmt = request.body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return str((fmt.get("json_schema") or {}).get("name") or "json_schema")
    return "answer"


def chat_body(content: str | None, model: str = "fake-model") -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def chat(content: str | dict | None) -> Reply:
    """A 200 chat.completion whose message content is `content` (a dict is sent as its JSON text)."""
    if isinstance(content, dict):
        content = json.dumps(content, ensure_ascii=False)
    return Reply(200, {}, chat_body(content))


def error(status: int, message: str = "scripted failure", headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, headers or {}, {"error": {"message": message, "type": "server_error", "code": None}})


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.queue: deque[Reply] = deque()
        self.handler: Callable[[Request], Reply] | None = None
        self.failures: list[str] = []  # tracebacks of handlers that raised, for check()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(Reply(404, {}, {"error": {"message": f"no route {self.path}"}}))
                    return
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    self._send(fake._reply_for(request))

            def _send(self, reply: Reply) -> None:
                body = reply.body
                if isinstance(body, dict | list):
                    data = json.dumps(body, ensure_ascii=False).encode()
                    content_type = "application/json"
                elif isinstance(body, str):
                    data = body.encode()
                    content_type = "text/plain; charset=utf-8"
                else:
                    data = body or b""
                    content_type = "application/octet-stream"
                self.send_response(reply.status)
                headers = {"Content-Type": content_type, **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # --- scripting ---------------------------------------------------------------------------

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.queue.clear()
            self.handler = None
            self.failures.clear()

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.queue.extend(replies)

    def _reply_for(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.queue:
                return self.queue.popleft()
            handler = self.handler
        if handler is None:
            return error(500, "nothing scripted")
        try:
            return handler(request)
        except Exception as exc:  # kept for check(); the client gets an answer, not a hang
            with self._lock:
                self.failures.append(f"{request.kind} request: " + "".join(traceback.format_exception(exc)))
            return error(400, f"fake handler failed: {exc!r}")

    def check(self) -> None:
        """Raise if a handler raised since the last reset: the test's script is wrong, so is the test."""
        with self._lock:
            failures = list(self.failures)
        if failures:
            raise AssertionError(f"{len(failures)} fake OpenAI handler call(s) failed; the first:\n{failures[0]}")

    # --- reading what was asked --------------------------------------------------------------

    def of_kind(self, kind: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.kind == kind]

    @property
    def kinds(self) -> list[str]:
        with self._lock:
            return [r.kind for r in self.requests]


def pipeline(
    condense: Callable[[Request], Reply] | Reply | None = None,
    route: Callable[[Request], Reply] | Reply | None = None,
    grade: Callable[[Request], Reply] | Reply | None = None,
    answer: Callable[[Request], Reply] | Reply | None = None,
) -> Callable[[Request], Reply]:
    """A handler that plays each of kbbot's calls; a part left None answers HTTP 500 (Retry-After: 0,
    so the client's retries cost no time)."""
    parts = {"CondensedQuery": condense, "RouteChoice": route, "GradeVerdict": grade, "answer": answer}

    def handle(request: Request) -> Reply:
        part = parts.get(request.kind)
        if part is None:
            return error(500, f"no script for {request.kind}", headers={"Retry-After": "0"})
        return part(request) if callable(part) else part

    return handle
