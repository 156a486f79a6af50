"""Durable records of the answers given and what people said about them (SQLite in the data dir).

They are what feedback, "how I found this" traces and knowledge-gap reports are built from, so they are
looked up by id and by time, never by scanning a log. Recording is best effort: a full disk never stops an
answer from going out.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from bot.agent.models import Answer
from bot.core.origin import Origin

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    answer_id TEXT PRIMARY KEY,
    at REAL NOT NULL,
    surface TEXT NOT NULL,
    channel TEXT,
    thread_ts TEXT,
    user TEXT,
    question TEXT NOT NULL,
    standalone_query TEXT NOT NULL,
    status TEXT NOT NULL,
    answer TEXT NOT NULL,
    kbs TEXT NOT NULL,
    citations TEXT NOT NULL,
    mode TEXT NOT NULL,
    rounds INTEGER NOT NULL,
    trace TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_at ON answers (at);
CREATE INDEX IF NOT EXISTS answers_thread ON answers (channel, thread_ts);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    answer_id TEXT NOT NULL,
    value TEXT NOT NULL,
    reason TEXT,
    user TEXT,
    channel TEXT,
    message_ts TEXT
);
CREATE INDEX IF NOT EXISTS feedback_answer ON feedback (answer_id);
"""


def new_answer_id() -> str:
    return uuid.uuid4().hex[:16]


class Records:
    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()
        self._ready = False
        self._lock = threading.Lock()

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = getattr(self._local, "db", None)
        if db is None or self._local.pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            db.row_factory = sqlite3.Row
            with self._lock:
                if not self._ready:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.executescript(SCHEMA)
                    self._ready = True
            self._local.db, self._local.pid = db, os.getpid()
        yield db

    def log_answer(self, origin: Origin, answer: Answer) -> str:
        answer_id = new_answer_id()
        # What "how I found this" shows (bot.core.traces): rounds carry their best evidence with locations.
        trace = {
            "route": asdict(answer.route),
            "searched_kbs": answer.searched_kbs,
            "rounds": [asdict(r) for r in answer.rounds],
            "notes": answer.notes,
            "timings_ms": answer.timings_ms,
        }
        row = (
            answer_id,
            time.time(),
            origin.surface.value,
            origin.channel,
            origin.thread_ts,
            origin.user,
            answer.question,
            answer.standalone_query,
            answer.status,
            answer.answer,
            json.dumps(answer.searched_kbs or answer.route.kbs),
            json.dumps([asdict(c) for c in answer.citations], ensure_ascii=False),
            answer.mode,
            len(answer.rounds),
            json.dumps(trace, ensure_ascii=False),
        )
        try:
            with self._db() as db:
                db.execute(f"INSERT INTO answers VALUES ({', '.join('?' * len(row))})", row)
        except (sqlite3.Error, OSError) as exc:  # the answer still goes out
            log.warning("could not record answer %s: %s", answer_id, exc)
        return answer_id

    def find_answer(self, answer_id: str) -> dict | None:
        with self._db() as db:
            row = db.execute("SELECT * FROM answers WHERE answer_id = ?", (answer_id,)).fetchone()
        return None if row is None else self._answer(row)

    def answers_in(self, channel: str, thread_ts: str) -> list[dict]:
        """The answers given in one Slack thread, oldest first."""
        with self._db() as db:
            rows = db.execute(
                "SELECT * FROM answers WHERE channel = ? AND thread_ts = ? ORDER BY at", (channel, thread_ts)
            ).fetchall()
        return [self._answer(r) for r in rows]

    @staticmethod
    def _answer(row: sqlite3.Row) -> dict:
        record = dict(row)
        for key in ("kbs", "citations", "trace"):
            record[key] = json.loads(record[key])
        return record

    def answered_in(self, channel: str, thread_ts: str) -> bool:
        with self._db() as db:
            row = db.execute(
                "SELECT 1 FROM answers WHERE channel = ? AND thread_ts = ? LIMIT 1", (channel, thread_ts)
            ).fetchone()
        return row is not None

    def log_feedback(
        self, answer_id: str, value: str, origin: Origin, message_ts: str | None = None, reason: str | None = None
    ) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO feedback (at, answer_id, value, reason, user, channel, message_ts)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (time.time(), answer_id, value, reason, origin.user, origin.channel, message_ts),
            )

    def feedback_for(self, answer_id: str) -> list[dict]:
        with self._db() as db:
            rows = db.execute("SELECT * FROM feedback WHERE answer_id = ? ORDER BY id", (answer_id,)).fetchall()
        return [dict(r) for r in rows]

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
