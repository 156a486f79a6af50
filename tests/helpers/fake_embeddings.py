"""A tiny OpenAI-compatible embeddings endpoint on 127.0.0.1 (`POST /v1/embeddings`), for tests that need
many kbbot processes and not the model: a child with KBBOT_EMBEDDING_BACKEND=openai pointed here starts in
seconds instead of loading torch and MiniLM.

Vectors are deterministic hashed bags of words (64-d, normalised): texts sharing words are close, so
retrieval still behaves sensibly. `hold_on("TEXT", marker)` makes the first request whose input contains
TEXT write `marker` and wait (until `release()`): a kbbot process is then provably blocked mid-embedding.
`reject("TEXT")` answers every request whose input contains TEXT with HTTP 400, as an endpoint refusing an
input does.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

DIMENSION = 64


def vector(text: str) -> list[float]:
    v = np.zeros(DIMENSION, dtype=np.float64)
    for word in re.findall(r"\w+", text.lower()) or ["empty"]:
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        v[int.from_bytes(digest[:4], "little") % DIMENSION] += 1.0 if digest[4] & 1 else -1.0
    norm = np.linalg.norm(v)
    return (v / norm if norm else np.eye(DIMENSION)[0]).tolist()


class FakeEmbeddings:
    def __init__(self) -> None:
        self.requests = 0
        self._hold: tuple[str, Path] | None = None
        self._rejected: set[str] = set()
        self.rejected = 0  # requests answered with 400
        self._released = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                texts = body.get("input") or []
                texts = [texts] if isinstance(texts, str) else texts
                fake._maybe_hold(texts)
                if fake._rejects(texts):
                    error = json.dumps({"error": {"message": "input rejected", "type": "invalid_request_error"}})
                    self.send_response(400)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(error)))
                    self.end_headers()
                    self.wfile.write(error.encode())
                    return
                payload = json.dumps(
                    {
                        "object": "list",
                        "model": body.get("model", "fake"),
                        "data": [
                            {"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)
                        ],
                        "usage": {"prompt_tokens": 0, "total_tokens": 0},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client was killed while it waited
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def hold_on(self, text: str, marker: Path) -> None:
        self._hold = (text, marker)

    def _maybe_hold(self, texts: list[str]) -> None:
        with self._lock:
            self.requests += 1
            hold = self._hold
            if hold is None or not any(hold[0] in t for t in texts):
                return
            self._hold = None  # once
        hold[1].write_text("embedding")
        self._released.wait(600)

    def reject(self, text: str) -> None:
        self._rejected.add(text)

    def _rejects(self, texts: list[str]) -> bool:
        with self._lock:
            if any(r in t for r in self._rejected for t in texts):
                self.rejected += 1
                return True
            return False

    def release(self) -> None:
        self._released.set()

    def start(self) -> FakeEmbeddings:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def settings(self) -> dict[str, str]:
        """The settings that point kbbot's embeddings here."""
        return {
            "KBBOT_EMBEDDING_BACKEND": "openai",
            "OPENAI_API_KEY": "sk-fake-embeddings",
            "OPENAI_BASE_URL": self.base_url,
        }
