"""The durable document registry (SQLite in the data dir).

It is the source of truth for what is live: a chunk in Chroma is retrievable only if its
(document, version) is the document's live version here. Ingest writes a new version's chunks
first, then flips `live_version` in one transaction, so a crash never exposes half a document.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS kbs (
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    embedding_model TEXT NOT NULL,
    dimension INTEGER NOT NULL,
    collection TEXT NOT NULL,
    generation INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    kb TEXT NOT NULL,
    name TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('processing', 'ready', 'failed')),
    error TEXT,
    live_version INTEGER,
    live_hash TEXT,
    live_chunks INTEGER NOT NULL DEFAULT 0,
    source_url TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (kb, name)
);
CREATE TABLE IF NOT EXISTS versions (
    kb TEXT NOT NULL,
    document TEXT NOT NULL,
    version INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('processing', 'ready', 'failed', 'retired')),
    chunks INTEGER NOT NULL DEFAULT 0,
    pid INTEGER,
    started_at REAL NOT NULL,
    PRIMARY KEY (kb, document, version)
);
"""


@dataclass(frozen=True)
class KbRecord:
    name: str
    description: str
    embedding_model: str
    dimension: int
    collection: str
    generation: int


@dataclass(frozen=True)
class DocumentRecord:
    kb: str
    name: str
    state: str
    error: str | None
    live_version: int | None
    live_hash: str | None
    live_chunks: int
    source_url: str | None


@dataclass(frozen=True)
class PendingVersion:
    kb: str
    document: str
    version: int
    had_live_version: bool


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Registry:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")  # persistent: readers never block the writer
            db.executescript(SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # One short-lived connection per operation: safe across threads and processes.
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            db.execute("PRAGMA synchronous=FULL")
            yield db
        finally:
            db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # --- knowledge bases ---------------------------------------------------------------------

    def get_kb(self, name: str) -> KbRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM kbs WHERE name = ?", (name,)).fetchone()
        return None if row is None else self._kb(row)

    def list_kbs(self) -> list[KbRecord]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM kbs ORDER BY name").fetchall()
        return [self._kb(r) for r in rows]

    @staticmethod
    def _kb(row: sqlite3.Row) -> KbRecord:
        return KbRecord(
            row["name"], row["description"], row["embedding_model"], row["dimension"], row["collection"],
            row["generation"],
        )

    def upsert_kb(self, name: str, description: str, embedding_model: str, dimension: int, collection: str) -> None:
        with self._transaction() as db:
            db.execute(
                """INSERT INTO kbs (name, description, embedding_model, dimension, collection, created_at)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT(name) DO UPDATE SET description = excluded.description""",
                (name, description, embedding_model, dimension, collection, time.time()),
            )

    def switch_collection(self, name: str, collection: str, embedding_model: str, dimension: int) -> None:
        """Point a KB at a freshly built collection (reindex) in one step."""
        with self._transaction() as db:
            db.execute(
                "UPDATE kbs SET collection = ?, embedding_model = ?, dimension = ?, generation = generation + 1"
                " WHERE name = ?",
                (collection, embedding_model, dimension, name),
            )

    def delete_kb(self, name: str) -> None:
        with self._transaction() as db:
            for table, column in (("versions", "kb"), ("documents", "kb"), ("kbs", "name")):
                db.execute(f"DELETE FROM {table} WHERE {column} = ?", (name,))

    def generation(self, kb: str) -> int:
        with self._connect() as db:
            row = db.execute("SELECT generation FROM kbs WHERE name = ?", (kb,)).fetchone()
        return -1 if row is None else int(row[0])

    # --- documents ---------------------------------------------------------------------------

    def get_document(self, kb: str, name: str) -> DocumentRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM documents WHERE kb = ? AND name = ?", (kb, name)).fetchone()
        return None if row is None else self._document(row)

    def list_documents(self, kb: str) -> list[DocumentRecord]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM documents WHERE kb = ? ORDER BY name", (kb,)).fetchall()
        return [self._document(r) for r in rows]

    @staticmethod
    def _document(row: sqlite3.Row) -> DocumentRecord:
        return DocumentRecord(
            row["kb"], row["name"], row["state"], row["error"], row["live_version"], row["live_hash"],
            row["live_chunks"], row["source_url"],
        )

    def live_versions(self, kb: str) -> dict[str, int]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT name, live_version FROM documents WHERE kb = ? AND live_version IS NOT NULL", (kb,)
            ).fetchall()
        return {r["name"]: r["live_version"] for r in rows}

    def begin_version(self, kb: str, document: str, content_hash: str) -> PendingVersion:
        """Record a new version as `processing`; the live version (if any) stays live."""
        now = time.time()
        with self._transaction() as db:
            row = db.execute(
                "SELECT COALESCE(MAX(version), 0) FROM versions WHERE kb = ? AND document = ?", (kb, document)
            ).fetchone()
            version = int(row[0]) + 1
            db.execute(
                "INSERT INTO versions (kb, document, version, content_hash, state, pid, started_at)"
                " VALUES (?, ?, ?, ?, 'processing', ?, ?)",
                (kb, document, version, content_hash, os.getpid(), now),
            )
            existing = db.execute(
                "SELECT live_version FROM documents WHERE kb = ? AND name = ?", (kb, document)
            ).fetchone()
            if existing is None:
                db.execute(
                    "INSERT INTO documents (kb, name, state, updated_at) VALUES (?, ?, 'processing', ?)",
                    (kb, document, now),
                )
            else:
                db.execute(
                    "UPDATE documents SET state = 'processing', error = NULL, updated_at = ?"
                    " WHERE kb = ? AND name = ?",
                    (now, kb, document),
                )
        return PendingVersion(kb, document, version, bool(existing and existing["live_version"]))

    def publish_version(
        self, pending: PendingVersion, content_hash: str, chunks: int, source_url: str | None
    ) -> int | None:
        """Flip the new version live in one transaction; return the version it replaced."""
        with self._transaction() as db:
            old = db.execute(
                "SELECT live_version FROM documents WHERE kb = ? AND name = ?", (pending.kb, pending.document)
            ).fetchone()
            db.execute(
                "UPDATE versions SET state = 'ready', chunks = ? WHERE kb = ? AND document = ? AND version = ?",
                (chunks, pending.kb, pending.document, pending.version),
            )
            db.execute(
                "UPDATE versions SET state = 'retired' WHERE kb = ? AND document = ? AND version != ?"
                " AND state = 'ready'",
                (pending.kb, pending.document, pending.version),
            )
            db.execute(
                """UPDATE documents SET state = 'ready', error = NULL, live_version = ?, live_hash = ?,
                   live_chunks = ?, source_url = COALESCE(?, source_url), updated_at = ?
                   WHERE kb = ? AND name = ?""",
                (pending.version, content_hash, chunks, source_url, time.time(), pending.kb, pending.document),
            )
            db.execute("UPDATE kbs SET generation = generation + 1 WHERE name = ?", (pending.kb,))
        return old["live_version"] if old else None

    def abandon_version(self, pending: PendingVersion, reason: str) -> None:
        """A failed new version: the document keeps its live version, or is marked failed."""
        with self._transaction() as db:
            self._abandon(db, pending.kb, pending.document, pending.version, reason)

    @staticmethod
    def _abandon(db: sqlite3.Connection, kb: str, document: str, version: int, reason: str) -> None:
        db.execute(
            "UPDATE versions SET state = 'failed' WHERE kb = ? AND document = ? AND version = ?",
            (kb, document, version),
        )
        row = db.execute("SELECT live_version FROM documents WHERE kb = ? AND name = ?", (kb, document)).fetchone()
        if row is not None and row["live_version"] is not None:
            db.execute(
                "UPDATE documents SET state = 'ready', error = ?, updated_at = ? WHERE kb = ? AND name = ?",
                (f"last update failed: {reason}", time.time(), kb, document),
            )
        else:
            db.execute(
                "UPDATE documents SET state = 'failed', error = ?, updated_at = ? WHERE kb = ? AND name = ?",
                (reason, time.time(), kb, document),
            )

    def recover_interrupted(self, kb: str) -> list[tuple[str, int]]:
        """Versions left `processing` by a dead process: abandon them; return (document, version)."""
        with self._transaction() as db:
            rows = db.execute(
                "SELECT document, version, pid FROM versions WHERE kb = ? AND state = 'processing'", (kb,)
            ).fetchall()
            dead = [(r["document"], r["version"]) for r in rows if not _pid_alive(r["pid"])]
            for document, version in dead:
                self._abandon(db, kb, document, version, "ingest was interrupted; upload the file again")
        return dead

    def stale_versions(self, kb: str) -> list[tuple[str, int]]:
        """Versions whose chunks may still be in the vector store but must never be retrieved."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT document, version FROM versions WHERE kb = ? AND state IN ('failed', 'retired')", (kb,)
            ).fetchall()
        return [(r["document"], r["version"]) for r in rows]

    def forget_versions(self, kb: str, versions: list[tuple[str, int]]) -> None:
        with self._transaction() as db:
            db.executemany(
                "DELETE FROM versions WHERE kb = ? AND document = ? AND version = ?",
                [(kb, d, v) for d, v in versions],
            )

    def delete_document(self, kb: str, name: str) -> int | None:
        """Remove a document from the registry (it stops being retrievable at once)."""
        with self._transaction() as db:
            row = db.execute("SELECT live_version FROM documents WHERE kb = ? AND name = ?", (kb, name)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE versions SET state = 'retired' WHERE kb = ? AND document = ?", (kb, name))
            db.execute("DELETE FROM documents WHERE kb = ? AND name = ?", (kb, name))
            db.execute("UPDATE kbs SET generation = generation + 1 WHERE name = ?", (kb,))
        return row["live_version"] or 0
