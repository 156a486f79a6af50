"""One SQLite file of the application layer, shared by threads and by forked processes.

sqlite3 connections must not cross threads or a fork, so each thread (of each process) opens its own; the
schema (and any migration) runs once per process, under a lock, on the first connection.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


class SqliteFile:
    def __init__(
        self,
        path: Path,
        schema: str,
        migrate: Callable[[sqlite3.Connection], None] | None = None,
        rows: bool = False,
        synchronous: str | None = None,
    ):
        """`rows`: rows as `sqlite3.Row`; `synchronous`: a PRAGMA synchronous level for every connection."""
        self.path = path
        self._schema, self._migrate, self._rows, self._synchronous = schema, migrate, rows, synchronous
        self._local = threading.local()
        self._ready = False
        self._lock = threading.Lock()

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        db = getattr(self._local, "db", None)
        if db is None or self._local.pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            if self._rows:
                db.row_factory = sqlite3.Row
            if self._synchronous:
                db.execute(f"PRAGMA synchronous={self._synchronous}")
            with self._lock:
                if not self._ready:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.executescript(self._schema)
                    if self._migrate is not None:
                        self._migrate(db)
                    self._ready = True
            self._local.db, self._local.pid = db, os.getpid()
        yield db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
