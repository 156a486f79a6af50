"""Durable records of the answers given and what people said about them (SQLite in the data dir).

They are what feedback, "how I found this" traces and knowledge-gap reports are built from, so they are
looked up by id and by time, never by scanning a log. Recording is best effort: a full disk never stops an
answer from going out.

Knowledge gaps read `gap_signals`: one row per refusal and per person's 👎 on an answer, for each KB it
concerns, written with the answer or the feedback. The gaps query reads only the rows of the viewer's KBs
in the window (the `(kb, at)` index) and groups them in SQLite, so App Home stays fast with many answers.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from bot.agent.models import Answer
from bot.core.gaps import DISLIKED, REFUSED, GapRow, clean_comment, gap_key
from bot.core.origin import Origin
from bot.core.sqlite_file import SqliteFile

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

# `signal` is "refused:<answer id>" or "disliked:<answer id>:<user>": a person's second 👎 on one answer
# is the same signal. `scope` is the JSON list of every KB the signal concerns (who may see it).
GAPS_SCHEMA = """
CREATE TABLE IF NOT EXISTS gap_signals (
    kb TEXT NOT NULL,
    at REAL NOT NULL,
    signal TEXT NOT NULL,
    kind TEXT NOT NULL,
    answer_id TEXT NOT NULL,
    gap_key TEXT NOT NULL,
    question TEXT NOT NULL,
    scope TEXT NOT NULL,
    reason TEXT,
    comment TEXT,
    UNIQUE (signal, kb)
);
CREATE INDEX IF NOT EXISTS gap_signals_kb_at ON gap_signals (kb, at);
"""

GAPS_QUERY = """
SELECT gap_key, scope, kind, reason, COUNT(DISTINCT signal) AS n, MAX(at) AS last_at, question
FROM gap_signals
WHERE kb IN ({kbs}) AND at >= ?
GROUP BY gap_key, scope, kind, reason
"""

COMMENTS_QUERY = """
SELECT gap_key, scope, comment FROM gap_signals
WHERE kb IN ({kbs}) AND at >= ? AND comment IS NOT NULL
ORDER BY at DESC LIMIT 1000
"""


def new_answer_id() -> str:
    return uuid.uuid4().hex[:16]


class Records:
    def __init__(self, path: Path):
        self.path = path
        # WAL with NORMAL sync survives a crash of the process; only a power cut can lose the last few
        # records. Records are best effort, and a sync per answer would cost more than the answer's
        # own bookkeeping.
        self._file = SqliteFile(path, SCHEMA, migrate=self._migrate, rows=True, synchronous="NORMAL")
        self._db = self._file.connect

    @staticmethod
    def _migrate(db: sqlite3.Connection) -> None:
        """Records written before knowledge gaps: add the comment column and derive the gap signals once."""
        columns = {r["name"] for r in db.execute("PRAGMA table_info(feedback)")}
        if "comment" not in columns:
            db.execute("ALTER TABLE feedback ADD COLUMN comment TEXT")
        new = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'gap_signals'").fetchone() is None
        db.executescript(GAPS_SCHEMA)
        if not new:
            return
        db.execute("BEGIN")
        for row in db.execute("SELECT * FROM answers WHERE status != 'answered'").fetchall():
            _add_signals(db, f"{REFUSED}:{row['answer_id']}", REFUSED, row, row["at"])
        for fb in db.execute("SELECT * FROM feedback WHERE value = 'bad' ORDER BY id").fetchall():
            row = db.execute("SELECT * FROM answers WHERE answer_id = ?", (fb["answer_id"],)).fetchone()
            if row is not None:
                signal = f"{DISLIKED}:{fb['answer_id']}:{fb['user'] or ''}"
                _add_signals(db, signal, DISLIKED, row, fb["at"], fb["reason"], fb["comment"])
        db.execute("COMMIT")

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
                db.execute("BEGIN")
                try:
                    db.execute(f"INSERT INTO answers VALUES ({', '.join('?' * len(row))})", row)
                    if answer.status != "answered":
                        record = db.execute("SELECT * FROM answers WHERE answer_id = ?", (answer_id,)).fetchone()
                        _add_signals(db, f"{REFUSED}:{answer_id}", REFUSED, record, record["at"])
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
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
        self,
        answer_id: str,
        value: str,
        origin: Origin,
        message_ts: str | None = None,
        reason: str | None = None,
        comment: str | None = None,
    ) -> int:
        """One feedback record (a 👎 also becomes a gap signal of the answer's KBs); its id."""
        now = time.time()
        with self._db() as db:
            db.execute("BEGIN")
            try:
                cursor = db.execute(
                    "INSERT INTO feedback (at, answer_id, value, reason, user, channel, message_ts, comment)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (now, answer_id, value, reason, origin.user, origin.channel, message_ts, comment),
                )
                if value == "bad":
                    record = db.execute("SELECT * FROM answers WHERE answer_id = ?", (answer_id,)).fetchone()
                    if record is not None:
                        signal = f"{DISLIKED}:{answer_id}:{origin.user or ''}"
                        _add_signals(db, signal, DISLIKED, record, now, reason, comment)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return int(cursor.lastrowid or 0)

    def set_feedback_reason(
        self, answer_id: str, origin: Origin, reason: str | None, comment: str | None, message_ts: str | None = None
    ) -> None:
        """Why this person's 👎 on this answer: stored on their latest 👎 record of it (and its gap signal);
        when there is none yet (the click's record was lost), the 👎 is recorded with its reason."""
        comment = clean_comment(comment)
        with self._db() as db:
            row = db.execute(
                "SELECT id FROM feedback WHERE answer_id = ? AND user IS ? AND value = 'bad' ORDER BY id DESC LIMIT 1",
                (answer_id, origin.user),
            ).fetchone()
            if row is None:
                self.log_feedback(answer_id, "bad", origin, message_ts, reason, comment)
                return
            db.execute("BEGIN")
            try:
                db.execute("UPDATE feedback SET reason = ?, comment = ? WHERE id = ?", (reason, comment, row["id"]))
                db.execute(
                    "UPDATE gap_signals SET reason = ?, comment = ? WHERE signal = ?",
                    (reason, comment, f"{DISLIKED}:{answer_id}:{origin.user or ''}"),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def gap_rows(self, kbs: list[str], since: float) -> list[GapRow]:
        """The gap signals of these KBs since then, grouped by (key, scope, kind, reason)."""
        if not kbs:
            return []
        with self._db() as db:
            rows = db.execute(GAPS_QUERY.format(kbs=", ".join("?" * len(kbs))), (*kbs, since)).fetchall()
        return [
            GapRow(
                r["gap_key"], tuple(json.loads(r["scope"])), r["kind"], r["reason"], r["n"], r["last_at"], r["question"]
            )
            for r in rows
        ]

    def gap_comments(self, kbs: list[str], since: float) -> list[tuple[str, tuple[str, ...], str]]:
        """(key, scope, comment) of the 👎 comments on these KBs since then, newest first."""
        if not kbs:
            return []
        with self._db() as db:
            rows = db.execute(COMMENTS_QUERY.format(kbs=", ".join("?" * len(kbs))), (*kbs, since)).fetchall()
        return [(r["gap_key"], tuple(json.loads(r["scope"])), r["comment"]) for r in rows]

    def explain_gaps_query(self, kbs: list[str], since: float) -> list[str]:
        """SQLite's plan for the gaps query (the tests check it searches an index, not the table)."""
        with self._db() as db:
            sql = "EXPLAIN QUERY PLAN " + GAPS_QUERY.format(kbs=", ".join("?" * len(kbs)))
            return [r["detail"] for r in db.execute(sql, (*kbs, since)).fetchall()]

    def feedback_for(self, answer_id: str) -> list[dict]:
        with self._db() as db:
            rows = db.execute("SELECT * FROM feedback WHERE answer_id = ? ORDER BY id", (answer_id,)).fetchall()
        return [dict(r) for r in rows]

    def close(self) -> None:
        self._file.close()


def _signal_kbs(kind: str, record: sqlite3.Row) -> list[str]:
    """The KBs a signal concerns: a refusal, those searched; a 👎, those its citations came from (else searched)."""
    searched = [k for k in json.loads(record["kbs"]) if isinstance(k, str)]
    if kind == DISLIKED:
        cited = [c.get("kb") for c in json.loads(record["citations"]) if isinstance(c, dict)]
        cited = [k for k in cited if isinstance(k, str)]
        return sorted(set(cited or searched))
    return sorted(set(searched))


def _add_signals(
    db: sqlite3.Connection,
    signal: str,
    kind: str,
    record: sqlite3.Row,
    at: float,
    reason: str | None = None,
    comment: str | None = None,
) -> None:
    kbs = _signal_kbs(kind, record)
    question = record["standalone_query"] or record["question"]
    key, scope = gap_key(question), json.dumps(kbs, ensure_ascii=False)
    db.executemany(
        "INSERT INTO gap_signals (kb, at, signal, kind, answer_id, gap_key, question, scope, reason, comment)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (signal, kb) DO UPDATE SET at = excluded.at, reason = excluded.reason,"
        " comment = excluded.comment",
        [(kb, at, signal, kind, record["answer_id"], key, question, scope, reason, comment) for kb in kbs],
    )
