"""A fake Slack Web API on 127.0.0.1, for tests and measurements.

A small threaded http.server that records every call and keeps just enough state to behave like Slack
for kbbot: messages per channel (so conversations.replies/history return what the bot posted), chat
streams, channel members, files (metadata + bytes behind url_private, which demands the bot token),
views and response_url posts. Errors and 429s can be injected per method.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlparse

BOT_TOKEN = "xoxb-fake-kbbot-token"
BOT_USER = "UBOTKBBOT1"
BOT_ID = "BBOTKBBOT1"
TEAM = "T0LUMEN001"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


@dataclass
class Call:
    method: str
    params: dict
    token: str | None
    at: float = field(default_factory=time.monotonic)


class FakeSlack:
    def __init__(self):
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._clock = itertools.count(1)
        self.methods_seen: set[str] = set()  # every Web API method called, across resets (the scope check)
        self.reset()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeSlack:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    def unstall(self) -> None:
        """Release every stalled call (each fails with `request_dropped`); later calls go through."""
        with self._lock:
            self.stalled = set()
            self._unstalled.set()
            self._unstalled = threading.Event()

    def reset(self) -> None:
        if hasattr(self, "_unstalled"):
            self.unstall()
        with self._lock:
            self.calls: list[Call] = []
            self.messages: dict[str, list[dict]] = {}
            self.members: dict[str, list[str]] = {}
            self.files: dict[str, tuple[dict, bytes]] = {}
            self.users: dict[str, dict] = {}  # user id -> users.info's `user` (profile.display_name...)
            self.errors: dict[str, str] = {}  # method -> Slack error to return
            self.rate_limit: dict[str, int] = {}  # method -> how many 429s to return first
            self.stalled: set[str] = set()  # methods whose calls hang (recorded first) until `unstall()`
            self._unstalled = threading.Event()
            self.downloads: list[tuple[str, str | None]] = []  # (path, authorization header)
            self.home_views: dict[str, dict] = {}  # user -> the Home tab view last published for them

    # --- state helpers for tests -------------------------------------------------------------

    def next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._clock):06d}"

    def add_message(self, channel: str, user: str, text: str, thread_ts: str | None = None, **extra) -> dict:
        with self._lock:
            message = {
                "type": "message",
                "user": user,
                "text": text,
                "ts": extra.pop("ts", None) or self.next_ts(),
                **extra,
            }
            if thread_ts:
                message["thread_ts"] = thread_ts
            self.messages.setdefault(channel, []).append(message)
            self._changed.notify_all()
            return message

    def add_file(self, name: str, data: bytes, size: int | None = None, mimetype: str = "text/markdown") -> dict:
        with self._lock:
            file_id = f"F{next(self._clock):09d}"
            meta = {
                "id": file_id,
                "name": name,
                "title": name,
                "mimetype": mimetype,
                "filetype": name.rsplit(".", 1)[-1],
                "size": len(data) if size is None else size,
                "url_private": f"{self.base}/files-pri/{TEAM}-{file_id}/{name}",
                "url_private_download": f"{self.base}/files-pri/{TEAM}-{file_id}/download/{name}",
                "permalink": f"https://lumen.slack.com/files/{BOT_USER}/{file_id}/{name}",
            }
            self.files[file_id] = (meta, data)
            return dict(meta)

    def calls_of(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def bot_replies(self, channel: str, thread_ts: str | None = None) -> list[dict]:
        """Messages the bot posted (chat.postMessage or a finished chat stream), optionally in one thread."""
        with self._lock:
            return [
                m
                for m in self.messages.get(channel, [])
                if m.get("bot_id") == BOT_ID
                and (thread_ts is None or m.get("thread_ts") == thread_ts)
                and not m.get("streaming")
            ]

    def wait_for(self, predicate, timeout: float = 20.0, what: str = "condition"):
        """Bounded wait on the fake's state: returns the predicate's truthy value or raises."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"timed out after {timeout}s waiting for {what}; calls: {[c.method for c in self.calls]}"
                    )
                self._changed.wait(min(remaining, 0.05))

    # --- the API -----------------------------------------------------------------------------

    def _record(self, method: str, params: dict, token: str | None) -> None:
        with self._lock:
            self.calls.append(Call(method, params, token))
            self._changed.notify_all()

    def _find(self, channel: str, ts: str) -> dict | None:
        return next((m for m in self.messages.get(channel, []) if m["ts"] == ts), None)

    def api(self, method: str, params: dict, token: str | None) -> tuple[int, dict, dict]:
        self._record(method, params, token)
        self.methods_seen.add(method)
        with self._lock:
            stalled, released = method in self.stalled, self._unstalled
        if stalled:
            # The caller hangs (e.g. to be killed mid-call); when released the call is dropped, never applied.
            released.wait(timeout=120)
            return 200, {"ok": False, "error": "request_dropped"}, {}
        with self._lock:
            if self.rate_limit.get(method, 0) > 0:
                self.rate_limit[method] -= 1
                return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}
            if method in self.errors:
                return 200, {"ok": False, "error": self.errors[method]}, {}
            if token != BOT_TOKEN:
                return 200, {"ok": False, "error": "invalid_auth"}, {}
            handler = getattr(self, "m_" + method.replace(".", "_"), None)
            if handler is None:
                return 200, {"ok": False, "error": "unknown_method"}, {}
            result = handler(params)
            self._changed.notify_all()
            return 200, {"ok": True, **result}, {}

    def m_auth_test(self, p: dict) -> dict:
        return {
            "url": "https://lumen.slack.com/",
            "team": "Lumen",
            "user": "kbbot",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _post(self, p: dict, **extra) -> dict:
        message = {
            "type": "message",
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "text": p.get("text", ""),
            "blocks": p.get("blocks"),
            "ts": self.next_ts(),
            **({"metadata": p["metadata"]} if p.get("metadata") else {}),
            **extra,
        }
        if p.get("thread_ts"):
            message["thread_ts"] = p["thread_ts"]
            parent = self._find(p["channel"], p["thread_ts"])
            if parent is not None:
                parent["reply_count"] = parent.get("reply_count", 0) + 1
        self.messages.setdefault(p["channel"], []).append(message)
        return message

    @staticmethod
    def check_blocks(blocks: object) -> None:
        """Slack refuses a message over Block Kit's limits with `invalid_blocks`: 50 blocks, 3000 characters
        per section or context text, 10 context elements."""
        if blocks is None:
            return
        if not isinstance(blocks, list) or not 0 < len(blocks) <= 50:
            raise LookupError("invalid_blocks")
        for block in blocks:
            texts = [block.get("text") or {}] if block.get("type") == "section" else []
            if block.get("type") == "context":
                if not 0 < len(block.get("elements") or []) <= 10:
                    raise LookupError("invalid_blocks")
                texts += [e for e in block["elements"] if "text" in e]
            if any(not 0 < len(t.get("text") or "") <= 3000 for t in texts):
                raise LookupError("invalid_blocks")

    def m_chat_postMessage(self, p: dict) -> dict:
        self.check_blocks(p.get("blocks"))
        message = self._post(p)
        return {"channel": p["channel"], "ts": message["ts"], "message": message}

    def m_chat_update(self, p: dict) -> dict:
        message = self._find(p["channel"], p["ts"]) or {}
        message.update({"text": p.get("text", ""), "blocks": p.get("blocks")})
        if p.get("metadata"):
            message["metadata"] = p["metadata"]
        message.pop("streaming", None)
        return {"channel": p["channel"], "ts": p["ts"]}

    def m_chat_postEphemeral(self, p: dict) -> dict:
        if not p.get("channel") or not p.get("user"):
            raise LookupError("invalid_arguments")
        self.check_blocks(p.get("blocks"))
        return {"message_ts": self.next_ts()}

    def m_users_info(self, p: dict) -> dict:
        if p.get("user") not in self.users:
            raise LookupError("user_not_found")
        return {"user": {"id": p["user"], **self.users[p["user"]]}}

    @staticmethod
    def _chunk_text(p: dict) -> str:
        text = p.get("markdown_text") or ""
        for chunk in p.get("chunks") or []:
            if chunk.get("type") == "markdown_text":
                text += chunk.get("text", "")
        return text

    def m_chat_startStream(self, p: dict) -> dict:
        message = self._post({**p, "text": self._chunk_text(p)}, streaming=True)
        return {"channel": p["channel"], "ts": message["ts"]}

    def m_chat_appendStream(self, p: dict) -> dict:
        message = self._find(p["channel"], p["ts"]) or {}
        message["text"] = message.get("text", "") + self._chunk_text(p)
        return {"channel": p["channel"], "ts": p["ts"]}

    def m_chat_stopStream(self, p: dict) -> dict:
        message = self._find(p["channel"], p["ts"]) or {}
        message["text"] = message.get("text", "") + self._chunk_text(p)
        message["blocks"] = p.get("blocks")
        if p.get("metadata"):
            message["metadata"] = p["metadata"]
        message.pop("streaming", None)
        return {"channel": p["channel"], "ts": p["ts"], "message": message}

    def m_assistant_threads_setStatus(self, p: dict) -> dict:
        return {}

    def m_assistant_threads_setSuggestedPrompts(self, p: dict) -> dict:
        prompts = p.get("prompts")
        prompts = json.loads(prompts) if isinstance(prompts, str) else prompts
        if not isinstance(prompts, list) or not 1 <= len(prompts) <= 4:
            raise LookupError("invalid_arguments")  # Slack: one to four prompts
        if any(not (pr.get("title") and pr.get("message")) for pr in prompts):
            raise LookupError("invalid_arguments")
        return {}

    def m_assistant_threads_setTitle(self, p: dict) -> dict:
        if not p.get("title"):
            raise LookupError("invalid_arguments")
        return {}

    def m_reactions_add(self, p: dict) -> dict:
        return {}

    def m_conversations_replies(self, p: dict) -> dict:
        thread = [m for m in self.messages.get(p["channel"], []) if m["ts"] == p["ts"] or m.get("thread_ts") == p["ts"]]
        thread = [m for m in thread if not m.get("streaming")]
        return {"messages": sorted(thread, key=lambda m: float(m["ts"])), "has_more": False}

    def m_conversations_history(self, p: dict) -> dict:
        latest = float(p.get("latest") or "inf")
        oldest = float(p.get("oldest") or 0)
        top = [
            m
            for m in self.messages.get(p["channel"], [])
            if m.get("thread_ts") in (None, m["ts"]) and oldest <= float(m["ts"]) < latest and not m.get("streaming")
        ]
        top.sort(key=lambda m: float(m["ts"]), reverse=True)
        return {"messages": top[: int(p.get("limit") or 100)], "has_more": False}

    def m_conversations_members(self, p: dict) -> dict:
        if p["channel"] not in self.members:
            raise LookupError("channel_not_found")
        return {"members": list(self.members[p["channel"]]), "response_metadata": {"next_cursor": ""}}

    def m_users_conversations(self, p: dict) -> dict:
        user = p.get("user")
        return {"channels": [{"id": c} for c, users in self.members.items() if user in users]}

    def m_views_open(self, p: dict) -> dict:
        view = p.get("view")
        view = json.loads(view) if isinstance(view, str) else view
        return {"view": {**(view or {}), "id": f"V{next(self._clock):09d}"}}

    def m_views_publish(self, p: dict) -> dict:
        view = p.get("view")
        view = json.loads(view) if isinstance(view, str) else view
        if not p.get("user_id") or not isinstance(view, dict) or view.get("type") != "home":
            raise LookupError("invalid_arguments")
        if len(view.get("blocks") or []) > 100:
            raise LookupError("invalid_blocks")
        self.home_views[p["user_id"]] = view
        return {"view": {**view, "id": f"V{next(self._clock):09d}"}}

    def m_files_info(self, p: dict) -> dict:
        if p.get("file") not in self.files:
            raise LookupError("file_not_found")
        return {"file": dict(self.files[p["file"]][0])}

    # --- HTTP --------------------------------------------------------------------------------

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _reply(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - file downloads
                path = urlparse(self.path).path
                auth = self.headers.get("Authorization")
                fake.downloads.append((path, auth))
                parts = path.strip("/").split("/")
                file_id = parts[1].split("-", 1)[-1] if len(parts) > 2 and parts[0] == "files-pri" else None
                if file_id not in fake.files:
                    self._reply(404, b"not found", "text/plain")
                elif auth != f"Bearer {BOT_TOKEN}":
                    # Slack serves its sign-in page (200, HTML) to requests without a valid token.
                    self._reply(200, b"<html><body>Sign in to Slack</body></html>", "text/html")
                else:
                    meta, data = fake.files[file_id]
                    self._reply(200, data, meta.get("mimetype") or "application/octet-stream")

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8") if length else ""
                parsed = urlparse(self.path)
                if parsed.path.startswith("/response/"):
                    payload = json.loads(raw or "{}")
                    fake._record("response_url", {"id": parsed.path.rsplit("/", 1)[-1], **payload}, None)
                    self._reply(200, b"ok", "text/plain")
                    return
                if not parsed.path.startswith("/api/"):
                    self._reply(404, b"not found", "text/plain")
                    return
                method = parsed.path[len("/api/") :]
                params = dict(parse_qsl(parsed.query))
                if "json" in (self.headers.get("Content-Type") or ""):
                    params.update(json.loads(raw or "{}"))
                else:
                    params.update(dict(parse_qsl(raw)))
                for key in ("blocks", "chunks", "view", "metadata"):
                    if isinstance(params.get(key), str):
                        with contextlib.suppress(json.JSONDecodeError):
                            params[key] = json.loads(params[key])
                auth = self.headers.get("Authorization") or ""
                token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else params.get("token")
                try:
                    status, body, headers = fake.api(method, params, token)
                except LookupError as exc:
                    status, body, headers = 200, {"ok": False, "error": str(exc.args[0])}, {}
                except Exception as exc:  # a bug in the fake: fail loudly in the caller
                    status, body, headers = 200, {"ok": False, "error": f"fake_error: {exc!r}"}, {}
                self._reply(status, json.dumps(body).encode(), "application/json; charset=utf-8", headers)

        return Handler
