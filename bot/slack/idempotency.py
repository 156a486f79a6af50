"""Each Slack event is handled once, even when Slack delivers it again.

Slack redelivers an event (same `event_id`, `X-Slack-Retry-Num: 1..3`) when it did not get a 200 within
3 seconds, and a message that @mentions the bot in a thread arrives twice (`app_mention` and `message`,
with different event ids). Both are handled by *claiming* a key before acting: `event:<event_id>` for
deliveries and `message:<channel>:<ts>` for the message being answered. Claims live in SQLite in the
data dir (a restart does not re-answer a redelivered event) and expire after a day.

A claimed question is also *held* until its reply is posted: the question itself is kept with the claim,
so a bot killed while answering answers it when it starts again (`bot.slack.resume`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from slack_bolt import BoltRequest, BoltResponse

log = logging.getLogger(__name__)

TTL_SECONDS = 24 * 3600


class ClaimLedger:
    def __init__(self, path: Path | None, ttl_s: float = TTL_SECONDS):
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._memory: dict[str, float] = {}
        self._db: sqlite3.Connection | None = None
        self._claims = 0
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, at REAL NOT NULL)")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS held (key TEXT PRIMARY KEY, payload TEXT NOT NULL, at REAL NOT NULL)"
                )
            except sqlite3.Error as exc:
                log.warning("delivery ledger %s unavailable (%s); de-duplicating in memory only", path, exc)
                self._db = None

    def claim(self, key: str) -> bool:
        """True the first time a key is claimed (within the TTL), False afterwards."""
        now = time.time()
        with self._lock:
            self._claims += 1
            if self._claims % 500 == 0:
                self._prune(now)
            if self._db is None:
                seen = self._memory.get(key)
                if seen is not None and now - seen < self.ttl_s:
                    return False
                self._memory[key] = now
                return True
            try:
                # One statement (a new key, or an expired claim taken again): every claim of a burst waits for this
                # lock, and each SQLite call inside it gives up the GIL and has to win it back from the answer threads.
                cursor = self._db.execute(
                    "INSERT INTO claims (key, at) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET at = excluded.at "
                    "WHERE claims.at < ?",
                    (key, now, now - self.ttl_s),
                )
                return cursor.rowcount == 1
            except sqlite3.Error as exc:
                log.warning("delivery ledger write failed (%s); falling back to memory", exc)
                seen = self._memory.get(key)
                self._memory[key] = now
                return seen is None

    def hold(self, key: str, payload: dict) -> None:
        """Keep a claimed question until `release`: if the process dies first, a restart answers it."""
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO held (key, payload, at) VALUES (?, ?, ?)",
                    (key, json.dumps(payload), time.time()),
                )
            except sqlite3.Error as exc:
                log.warning("could not hold %s for a restart (%s)", key, exc)

    def release(self, key: str) -> None:
        """The question was answered (or never can be): nothing to resume."""
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("DELETE FROM held WHERE key = ?", (key,))

    def held(self) -> list[tuple[str, dict, float]]:
        """Questions claimed by an earlier run and never answered: (key, payload, when claimed), oldest first."""
        with self._lock:
            if self._db is None:
                return []
            rows = self._db.execute("SELECT key, payload, at FROM held ORDER BY at").fetchall()
        return [(key, json.loads(payload), at) for key, payload, at in rows]

    def _prune(self, now: float) -> None:
        cutoff = now - self.ttl_s
        self._memory = {k: v for k, v in self._memory.items() if v >= cutoff}
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("DELETE FROM claims WHERE at < ?", (cutoff,))

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def deduplicate_deliveries(ledger: ClaimLedger) -> Callable:
    """Global Bolt middleware: a redelivered event is acknowledged and dropped."""

    def middleware(req: BoltRequest, body: dict, next: Callable[[], BoltResponse]) -> BoltResponse | None:
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if event_id and not ledger.claim(f"event:{event_id}"):
            retry = (req.headers.get("x-slack-retry-num") or ["?"])[0]
            reason = (req.headers.get("x-slack-retry-reason") or ["?"])[0]
            log.info("event %s already handled; dropping redelivery (retry %s, %s)", event_id, retry, reason)
            return BoltResponse(status=200, body="", headers={"x-slack-no-retry": "1"})
        return next()

    return middleware
