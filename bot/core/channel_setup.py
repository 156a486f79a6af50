"""How each Slack channel is set up from Slack itself (`/kb channel …`), kept durably in SQLite in the data dir.

Two things per channel: which KBs it searches first beyond (or instead of) what the kb.toml files declare,
and whether kbbot answers top-level questions there without a mention (auto-reply). Only changes are stored:
a KB with no row for a channel follows its kb.toml `channels`. Access rules are never stored here — who may
read a KB stays in kb.toml alone; `permissions` combines these rows with the declarations.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from bot.core.sqlite_file import SqliteFile

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS channel_kbs (
    channel TEXT NOT NULL,
    kb TEXT NOT NULL,
    searched_first INTEGER NOT NULL,
    changed_by TEXT,
    at REAL NOT NULL,
    PRIMARY KEY (channel, kb)
);
CREATE TABLE IF NOT EXISTS channel_options (
    channel TEXT PRIMARY KEY,
    autoreply INTEGER NOT NULL,
    changed_by TEXT,
    at REAL NOT NULL
);
"""


@dataclass(frozen=True)
class ChannelChange:
    """A KB put into (or taken out of) a channel's searched-first list from Slack."""

    channel: str
    kb: str
    searched_first: bool
    changed_by: str | None
    at: float


class ChannelSetup:
    def __init__(self, path: Path):
        self.path = path
        self._file = SqliteFile(path, SCHEMA)
        self._db = self._file.connect

    def changes(self, channel: str | None = None) -> list[ChannelChange]:
        """The stored changes, of one channel or of all; raises sqlite3.Error when they cannot be read."""
        query = "SELECT channel, kb, searched_first, changed_by, at FROM channel_kbs"
        with self._db() as db:
            rows = (
                db.execute(query + " WHERE channel = ? ORDER BY kb", (channel,)).fetchall()
                if channel is not None
                else db.execute(query + " ORDER BY channel, kb").fetchall()
            )
        return [ChannelChange(c, kb, bool(first), by, at) for c, kb, first, by, at in rows]

    def set_searched_first(self, channel: str, kb: str, searched_first: bool, user: str | None) -> None:
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO channel_kbs (channel, kb, searched_first, changed_by, at)"
                " VALUES (?, ?, ?, ?, ?)",
                (channel, kb, int(searched_first), user, time.time()),
            )

    def autoreply(self, channel: str) -> bool:
        """Whether auto-reply is on in this channel; raises sqlite3.Error when it cannot be read."""
        with self._db() as db:
            row = db.execute("SELECT autoreply FROM channel_options WHERE channel = ?", (channel,)).fetchone()
        return bool(row and row[0])

    def set_autoreply(self, channel: str, on: bool, user: str | None) -> None:
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO channel_options (channel, autoreply, changed_by, at) VALUES (?, ?, ?, ?)",
                (channel, int(on), user, time.time()),
            )

    def close(self) -> None:
        self._file.close()
