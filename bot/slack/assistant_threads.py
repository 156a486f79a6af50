"""Which DM threads are assistant-pane threads, and the channel each one's user is looking at.

Bolt's `Assistant` treats every threaded DM message as an assistant message; kbbot also has plain DM threads
(a question's thread, files dropped for upload). Slack says which threads are pane threads when it sends
`assistant_thread_started`, so that is recorded here, with the thread's context (`assistant_thread_context_changed`
updates it). The record lives in SQLite in the data dir, so a restart keeps it, and looking it up costs no Web API
call (Bolt's default store reads the thread with conversations.replies on every message and rewrites the greeting
with chat.update on every context change).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path

from slack_bolt.context.assistant.thread_context import AssistantThreadContext
from slack_bolt.context.assistant.thread_context_store.store import AssistantThreadContextStore

log = logging.getLogger(__name__)

KEEP_S = 90 * 24 * 3600  # a pane thread idle this long is forgotten (its messages then count as a DM thread)


class PaneThreads(AssistantThreadContextStore):
    def __init__(self, path: Path | None):
        self._lock = threading.Lock()
        self._memory: dict[tuple[str, str], dict] = {}
        self._db: sqlite3.Connection | None = None
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS pane_threads (channel TEXT NOT NULL, thread_ts TEXT NOT NULL, "
                    "context TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (channel, thread_ts))"
                )
                self._db.execute("DELETE FROM pane_threads WHERE at < ?", (time.time() - KEEP_S,))
            except sqlite3.Error as exc:
                log.warning("assistant thread store %s unavailable (%s); keeping pane threads in memory", path, exc)
                self._db = None

    def save(self, *, channel_id: str, thread_ts: str, context: dict[str, str]) -> None:
        """Remember a pane thread (or its new context); an empty context is a pane thread with no channel."""
        context = {k: str(v) for k, v in (context or {}).items() if isinstance(k, str) and v is not None}
        with self._lock:
            self._memory[(channel_id, thread_ts)] = context
            if self._db is None:
                return
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO pane_threads (channel, thread_ts, context, at) VALUES (?, ?, ?, ?)",
                    (channel_id, thread_ts, json.dumps(context), time.time()),
                )
            except sqlite3.Error as exc:
                log.warning("could not record pane thread %s/%s (%s); kept in memory", channel_id, thread_ts, exc)

    def context_of(self, channel_id: str, thread_ts: str) -> dict[str, str] | None:
        """The thread's context if it is a pane thread, else None."""
        with self._lock:
            if (channel_id, thread_ts) in self._memory:
                return dict(self._memory[(channel_id, thread_ts)])
            if self._db is None:
                return None
            try:
                row = self._db.execute(
                    "SELECT context FROM pane_threads WHERE channel = ? AND thread_ts = ?", (channel_id, thread_ts)
                ).fetchone()
            except sqlite3.Error as exc:
                log.warning("could not read pane thread %s/%s (%s)", channel_id, thread_ts, exc)
                return None
        if row is None:
            return None
        try:
            context = json.loads(row[0])
        except json.JSONDecodeError:
            context = {}
        context = context if isinstance(context, dict) else {}
        with self._lock:
            self._memory[(channel_id, thread_ts)] = context
        return dict(context)

    def is_pane_thread(self, channel_id: str, thread_ts: str | None) -> bool:
        return bool(thread_ts) and self.context_of(channel_id, thread_ts or "") is not None

    def find(self, *, channel_id: str, thread_ts: str) -> AssistantThreadContext | None:
        """Bolt's `get_thread_context()` for a message in the thread."""
        context = self.context_of(channel_id, thread_ts)
        if not context or not context.get("channel_id"):
            return None
        return AssistantThreadContext(context)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()
                self._db = None
