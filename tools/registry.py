"""The durable document registry (SQLite in the data dir).

It is the source of truth for what is live: a chunk in Chroma is retrievable only if its
(document, version) is the document's live version here. Ingest writes a new version's chunks
first, then flips `live_version` in one transaction, so a crash never exposes half a document.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools.manifests import KnowledgeBaseManifest

# How many generations of live changes are kept: an index further behind than this reads every row instead.
LIVE_CHANGES_KEPT = 256

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
    owner TEXT,
    started_at REAL NOT NULL,
    PRIMARY KEY (kb, document, version)
);
-- The highest version number ever handed out per document. It survives forgetting versions and
-- deleting the document, so a chunk id (kb/doc@vN#i) is never reused for different text: a citation
-- kept somewhere (a Slack thread) can go stale, but never points at someone else's words.
CREATE TABLE IF NOT EXISTS version_counters (
    kb TEXT NOT NULL,
    document TEXT NOT NULL,
    last_version INTEGER NOT NULL,
    PRIMARY KEY (kb, document)
);
-- The generation a KB of this name starts at if it is created again: generations never repeat for a
-- name, so anything cached by (KB, generation), in any process, cannot outlive a delete + re-create.
CREATE TABLE IF NOT EXISTS generation_floors (
    name TEXT PRIMARY KEY,
    generation INTEGER NOT NULL
);
-- What each generation changed: per document whose live version it replaced or removed, the version live
-- before (NULL: none) and after (NULL: deleted), with their chunks. A derived index (keyword) of an
-- older generation catches up from these rows instead of reading every document's row (half a million at a
-- million chunks). A generation with no row here (a reindex's switch, a registry written before this table,
-- rows pruned) cannot be caught up from: the reader then reads every row, as before.
CREATE TABLE IF NOT EXISTS live_changes (
    kb TEXT NOT NULL,
    generation INTEGER NOT NULL,
    document TEXT NOT NULL,
    old_version INTEGER,
    old_chunks INTEGER,
    new_version INTEGER,
    new_chunks INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kb, generation, document)
);
-- Recovery looks for failed, retired and in-flight versions at every open and ingest: without this index
-- that is a scan of every version of the KB.
CREATE INDEX IF NOT EXISTS versions_by_state ON versions (kb, state);
-- Per chunk, a vector for each answer unit (sentence) of its text, pooled from the chunk's own
-- forward pass at ingest: the offline answer scores sentences by meaning without encoding them.
-- Rows of versions that are forgotten go with them; a missing row only costs an encode later.
CREATE TABLE IF NOT EXISTS unit_vectors (
    kb TEXT NOT NULL,
    document TEXT NOT NULL,
    version INTEGER NOT NULL,
    chunk_index INTEGER NOT NULL,
    model TEXT NOT NULL,
    vectors BLOB NOT NULL,
    PRIMARY KEY (kb, document, version, chunk_index)
);
-- Each KB's last known manifest (description, channels, access rules), so access never depends on a file
-- being readable right now: a kb.toml that breaks or disappears leaves these rules in force (and `problem`
-- says why), and a KB with no row here has no known rules at all. `visibility` is NULL when a declaration
-- was seen broken before any good one was ever read.
CREATE TABLE IF NOT EXISTS kb_manifests (
    kb TEXT PRIMARY KEY,
    source TEXT NOT NULL CHECK (source IN ('declared', 'created')),
    path TEXT,
    description TEXT NOT NULL DEFAULT '',
    visibility TEXT CHECK (visibility IN ('public', 'restricted')),
    channels TEXT NOT NULL DEFAULT '[]',
    allowed_channels TEXT NOT NULL DEFAULT '[]',
    uploaders TEXT NOT NULL DEFAULT '[]',
    problem TEXT,
    updated_at REAL NOT NULL
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
class ManifestRecord:
    """A KB's last known manifest as stored. `manifest` is None when no readable declaration was ever seen."""

    kb: str
    source: str  # "declared" (knowledge_bases/<kb>/kb.toml) | "created" (`kbbot kb create`)
    path: str | None
    manifest: KnowledgeBaseManifest | None
    problem: str | None  # why the declaration cannot be read now; the stored rules stay in force


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
    uploaded_by: str | None = None  # the Slack user who uploaded the live version (None: not a Slack upload)
    published_at: float | None = None  # when the live version went live (epoch seconds)
    updated_at: float | None = None  # when its state last changed (a new version went live, or failed)


@dataclass(frozen=True)
class PendingVersion:
    kb: str
    document: str
    version: int
    had_live_version: bool


class RegistryConflict(Exception):
    """A compare-and-set was refused: the KB changed under the caller. Nothing was written; the
    message is for people."""


class CollectionChanged(RegistryConflict):
    """The KB was switched to another collection (a reindex) after the caller wrote its chunks."""

    def __init__(self, kb: str, expected: str, current: str):
        super().__init__(f"knowledge base {kb!r} was re-indexed while this was being ingested")
        self.kb, self.expected, self.current = kb, expected, current


@dataclass(frozen=True)
class Published:
    """One version's outcome at the flip: live (replacing `replaced`), or refused with a reason."""

    pending: PendingVersion
    replaced: int | None = None
    conflict: str | None = None

    @property
    def live(self) -> bool:
        return self.conflict is None


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


class ProcessLease:
    """Proof that an ingesting process is still alive: an exclusive lock on a file it holds open.

    A pid alone is not enough: after a crash and restart (a container's PID 1, say) the new process
    often gets the same pid, and the old ingest would look alive forever. The kernel drops the lock
    the moment its holder dies, whatever pid comes next, so "can I take the lock?" answers "is the
    owner dead?" exactly (also across containers sharing the data dir).
    """

    _by_directory: dict[Path, ProcessLease] = {}
    _registry_lock = threading.Lock()

    @classmethod
    def for_directory(cls, directory: Path) -> ProcessLease:
        """One lease per process and data dir, however many registries are opened on it."""
        key = directory.resolve()
        with cls._registry_lock:
            if key not in cls._by_directory:
                cls._by_directory[key] = cls(key)
            return cls._by_directory[key]

    def __init__(self, directory: Path):
        self.directory = directory
        self._lock = threading.Lock()
        self._token: str | None = None
        self._pid: int | None = None
        self._handle = None
        self._in_flight = 0

    def acquire(self, count: int = 1) -> str:
        """Hold the lease for `count` more versions in flight; returns its token (what the registry records).

        The lock file exists only while this process has versions in flight, so a long test session or
        a bot touching many data dirs keeps no file descriptors open for idle ones.
        """
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's lease is not ours
                self._token, self._handle, self._in_flight = None, None, 0
            if self._token is None:
                import fcntl

                self.directory.mkdir(parents=True, exist_ok=True)
                token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}.lock"
                handle = (self.directory / token).open("a+b")
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._token, self._pid, self._handle = token, os.getpid(), handle
            self._in_flight += count
            return self._token

    def release(self, count: int = 1) -> None:
        """`count` versions are no longer in flight (published or abandoned)."""
        with self._lock:
            if self._pid != os.getpid() or self._token is None:
                return
            self._in_flight = max(0, self._in_flight - count)
            if self._in_flight == 0:
                self._drop()

    def _drop(self) -> None:
        path, handle = self.directory / self._token, self._handle  # type: ignore[operator]
        self._token, self._handle = None, None
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            handle.close()

    def holder_alive(self, token: str) -> bool:
        with self._lock:
            if token == self._token and self._pid == os.getpid():
                return True
        path = self.directory / token
        if "/" in token or not path.is_file():
            return False
        import fcntl

        try:
            with path.open("a+b") as handle:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        except OSError:
            return False
        with contextlib.suppress(OSError):
            path.unlink()  # the holder is gone: tidy its lease file
        return False


@dataclass(frozen=True)
class LiveChange:
    """How a document's live version changed over some generations (None: no live version)."""

    before: int | None
    before_chunks: int | None  # None: not known (logged before the log kept it)
    after: int | None
    after_chunks: int


def _log_live_changes(db: sqlite3.Connection, kb: str, changes: dict[str, LiveChange]) -> None:
    """Record what the generation about to be made changes (inside its transaction, before the bump), and drop
    rows older than LIVE_CHANGES_KEPT generations."""
    row = db.execute("SELECT generation FROM kbs WHERE name = ?", (kb,)).fetchone()
    if row is None:
        return
    generation = int(row[0]) + 1
    db.executemany(
        "INSERT OR REPLACE INTO live_changes"
        " (kb, generation, document, old_version, old_chunks, new_version, new_chunks) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(kb, generation, d, c.before, c.before_chunks, c.after, c.after_chunks) for d, c in changes.items()],
    )
    db.execute("DELETE FROM live_changes WHERE kb = ? AND generation <= ?", (kb, generation - LIVE_CHANGES_KEPT))


class Registry:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.lease = ProcessLease.for_directory(path.parent / "leases")
        self._local = threading.local()
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")  # persistent: readers never block the writer
            db.executescript(SCHEMA)
            columns = {row["name"] for row in db.execute("PRAGMA table_info(versions)")}
            if "owner" not in columns:  # registries written before leases existed
                with contextlib.suppress(sqlite3.OperationalError):  # another process just added it
                    db.execute("ALTER TABLE versions ADD COLUMN owner TEXT")
            # Where each document came from ("sync", "paths", "upload"; NULL: before origins were kept).
            # Who uploaded the live version from Slack (NULL: not a Slack upload, or before uploaders were kept)
            # and when it went live (NULL: before that was kept; `updated_at` then stands in for it).
            columns = {row["name"] for row in db.execute("PRAGMA table_info(documents)")}
            for column, kind in (("origin", "TEXT"), ("uploaded_by", "TEXT"), ("published_at", "REAL")):
                if column not in columns:
                    with contextlib.suppress(sqlite3.OperationalError):  # another process just added it
                        db.execute(f"ALTER TABLE documents ADD COLUMN {column} {kind}")
            columns = {row["name"] for row in db.execute("PRAGMA table_info(live_changes)")}
            if "old_chunks" not in columns:  # a log kept before it had the replaced versions' chunks
                with contextlib.suppress(sqlite3.OperationalError):
                    db.execute("ALTER TABLE live_changes ADD COLUMN old_chunks INTEGER")  # NULL: not known

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection (autocommit; transactions are explicit and short).

        One connection per thread and process, kept open: opening and closing one per operation
        made SQLite checkpoint the WAL at every close, which cost more than the ingest's own writes.
        """
        db = getattr(self._local, "db", None)
        if db is None or self._local.pid != os.getpid():
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA synchronous=FULL")
            self._local.db, self._local.pid = db, os.getpid()
        yield db

    def close(self) -> None:
        """Close the calling thread's connection (others close with their threads)."""
        db = getattr(self._local, "db", None)
        if db is not None and self._local.pid == os.getpid():
            db.close()
        self._local.db = None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                # Also when COMMIT itself failed: the connection is never left inside a transaction.
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise

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
            row["name"],
            row["description"],
            row["embedding_model"],
            row["dimension"],
            row["collection"],
            row["generation"],
        )

    def upsert_kb(self, name: str, description: str, embedding_model: str, dimension: int, collection: str) -> None:
        with self._transaction() as db:
            db.execute(
                """INSERT INTO kbs (name, description, embedding_model, dimension, collection, created_at, generation)
                   VALUES (?, ?, ?, ?, ?, ?, COALESCE((SELECT generation FROM generation_floors WHERE name = ?), 0))
                   ON CONFLICT(name) DO UPDATE SET description = excluded.description""",
                (name, description, embedding_model, dimension, collection, time.time(), name),
            )

    def switch_collection(
        self, name: str, collection: str, embedding_model: str, dimension: int, expected_generation: int | None = None
    ) -> bool:
        """Point a KB at a freshly built collection (reindex) in one step.

        With `expected_generation`, only if the KB did not change since the collection was built from
        it (returns False otherwise, and nothing is switched).
        """
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE kbs SET collection = ?, embedding_model = ?, dimension = ?, generation = generation + 1"
                " WHERE name = ? AND (? IS NULL OR generation = ?)",
                (collection, embedding_model, dimension, name, expected_generation, expected_generation),
            )
            return cursor.rowcount == 1

    def delete_kb(self, name: str) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO generation_floors (name, generation) "
                "SELECT name, generation + 1 FROM kbs WHERE name = ?",
                (name,),
            )
            tables = ("versions", "documents", "unit_vectors", "live_changes")
            for table, column in [(t, "kb") for t in tables] + [("kbs", "name")]:
                db.execute(f"DELETE FROM {table} WHERE {column} = ?", (name,))

    def generation_floor(self, name: str) -> int:
        """The generation a new KB of this name starts at (0, or past every earlier KB of the name)."""
        with self._connect() as db:
            row = db.execute("SELECT generation FROM generation_floors WHERE name = ?", (name,)).fetchone()
        return int(row["generation"]) if row else 0

    def generation(self, kb: str) -> int:
        with self._connect() as db:
            row = db.execute("SELECT generation FROM kbs WHERE name = ?", (kb,)).fetchone()
        return -1 if row is None else int(row[0])

    # --- documents ---------------------------------------------------------------------------

    def get_document(self, kb: str, name: str) -> DocumentRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM documents WHERE kb = ? AND name = ?", (kb, name)).fetchone()
        return None if row is None else self._document(row)

    def list_documents(self, kb: str, names: Iterable[str] | None = None) -> list[DocumentRecord]:
        """The KB's documents by name, or only those named (an answer's citations: not a whole large KB)."""
        with self._connect() as db:
            if names is None:
                rows = db.execute("SELECT * FROM documents WHERE kb = ? ORDER BY name", (kb,)).fetchall()
            else:
                wanted, rows = sorted(set(names)), []
                for start in range(0, len(wanted), 500):
                    part = wanted[start : start + 500]
                    rows += db.execute(
                        f"SELECT * FROM documents WHERE kb = ? AND name IN ({','.join('?' * len(part))}) ORDER BY name",
                        (kb, *part),
                    ).fetchall()
        return [self._document(r) for r in rows]

    @staticmethod
    def _document(row: sqlite3.Row) -> DocumentRecord:
        return DocumentRecord(
            row["kb"],
            row["name"],
            row["state"],
            row["error"],
            row["live_version"],
            row["live_hash"],
            row["live_chunks"],
            row["source_url"],
            row["uploaded_by"],
            (row["published_at"] or row["updated_at"]) if row["live_version"] is not None else None,
            row["updated_at"],
        )

    def set_origin(self, kb: str, names: list[str], origin: str | None) -> None:
        """Record where these documents' live versions came from (see tools.ingest.ORIGIN_SYNC)."""
        with self._transaction() as db:
            db.executemany(
                "UPDATE documents SET origin = ? WHERE kb = ? AND name = ?", [(origin, kb, n) for n in names]
            )

    def origins(self, kb: str) -> dict[str, str | None]:
        """{document: origin} for every document of a KB (None where it was never recorded)."""
        with self._connect() as db:
            rows = db.execute("SELECT name, origin FROM documents WHERE kb = ?", (kb,)).fetchall()
        return {r["name"]: r["origin"] for r in rows}

    def live_versions(self, kb: str) -> dict[str, int]:
        return self.live_state(kb)[0]

    def live_state(self, kb: str) -> tuple[dict[str, int], int]:
        """({document: live version}, total chunks of the live versions), read together."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT name, live_version, live_chunks FROM documents WHERE kb = ? AND live_version IS NOT NULL", (kb,)
            ).fetchall()
        return {r["name"]: r["live_version"] for r in rows}, sum(int(r["live_chunks"]) for r in rows)

    def live_snapshot(self, kb: str) -> tuple[int, dict[str, int], int]:
        """(generation, {document: live version}, total live chunks), read in one transaction: what is
        derived from it (a keyword index) is labelled with the generation it really shows."""
        generation, rows = self._live_rows(kb)
        return generation, {r["name"]: r["live_version"] for r in rows}, sum(int(r["live_chunks"]) for r in rows)

    def live_chunk_counts(self, kb: str) -> tuple[int, dict[str, tuple[int, int]]]:
        """(generation, {document: (live version, its chunks)}), read in one transaction."""
        generation, rows = self._live_rows(kb)
        return generation, {r["name"]: (int(r["live_version"]), int(r["live_chunks"])) for r in rows}

    def live_changes(self, kb: str, since: int) -> tuple[int, dict[str, LiveChange]] | None:
        """(generation, {document: its live version at `since` and now}) for the documents whose live version
        changed after generation `since`, read in one transaction; None when some generation in between is not
        logged (then only a full read of live_chunk_counts / live_snapshot is right)."""
        with self._connect() as db:
            db.execute("BEGIN")  # deferred: one consistent read snapshot (WAL), no write lock
            try:
                row = db.execute("SELECT generation FROM kbs WHERE name = ?", (kb,)).fetchone()
                rows = db.execute(
                    "SELECT generation, document, old_version, old_chunks, new_version, new_chunks FROM live_changes"
                    " WHERE kb = ? AND generation > ? ORDER BY generation",
                    (kb, since),
                ).fetchall()
            finally:
                db.execute("COMMIT")
        if row is None:
            return None
        generation = int(row[0])
        if {int(r["generation"]) for r in rows} != set(range(since + 1, generation + 1)):
            return None  # a generation made without a log row (a reindex, an older kbbot) or pruned
        changes: dict[str, LiveChange] = {}
        for r in rows:
            first = changes.get(r["document"])  # the version an index of `since` holds is the first change's old one
            before = (first.before, first.before_chunks) if first else (r["old_version"], r["old_chunks"])
            changes[r["document"]] = LiveChange(*before, r["new_version"], int(r["new_chunks"]))
        return generation, changes

    def _live_rows(self, kb: str) -> tuple[int, list]:
        """The KB's generation and its live documents' rows, from one consistent read snapshot."""
        with self._connect() as db:
            db.execute("BEGIN")  # deferred: one consistent read snapshot (WAL), no write lock
            try:
                row = db.execute("SELECT generation FROM kbs WHERE name = ?", (kb,)).fetchone()
                rows = db.execute(
                    "SELECT name, live_version, live_chunks FROM documents WHERE kb = ? AND live_version IS NOT NULL",
                    (kb,),
                ).fetchall()
            finally:
                db.execute("COMMIT")
        return (-1 if row is None else int(row[0])), rows

    def begin_version(self, kb: str, document: str, content_hash: str) -> PendingVersion:
        """Record a new version as `processing`; the live version (if any) stays live."""
        return self.begin_versions(kb, [(document, content_hash)])[0]

    def begin_versions(self, kb: str, items: list[tuple[str, str]]) -> list[PendingVersion]:
        """begin_version() for many (document, content hash) pairs in one transaction."""
        owner = self.lease.acquire(len(items))
        now = time.time()
        pendings = []
        try:
            self._begin(owner, now, kb, items, pendings)
        except BaseException:
            self.lease.release(len(items))
            raise
        return pendings

    def _begin(self, owner: str, now: float, kb: str, items: list[tuple[str, str]], pendings: list) -> None:
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM kbs WHERE name = ?", (kb,)).fetchone() is None:
                raise RegistryConflict(f"knowledge base {kb!r} no longer exists (it was deleted)")
            for document, content_hash in items:
                row = db.execute(
                    "SELECT MAX(COALESCE((SELECT MAX(version) FROM versions WHERE kb = ?1 AND document = ?2), 0),"
                    " COALESCE((SELECT last_version FROM version_counters WHERE kb = ?1 AND document = ?2), 0))",
                    (kb, document),
                ).fetchone()
                version = int(row[0]) + 1
                db.execute(
                    "INSERT INTO version_counters (kb, document, last_version) VALUES (?, ?, ?)"
                    " ON CONFLICT(kb, document) DO UPDATE SET last_version = excluded.last_version",
                    (kb, document, version),
                )
                db.execute(
                    "INSERT INTO versions (kb, document, version, content_hash, state, pid, owner, started_at)"
                    " VALUES (?, ?, ?, ?, 'processing', ?, ?, ?)",
                    (kb, document, version, content_hash, os.getpid(), owner, now),
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
                pendings.append(PendingVersion(kb, document, version, bool(existing and existing["live_version"])))

    def publish_version(
        self,
        pending: PendingVersion,
        content_hash: str,
        chunks: int,
        source_url: str | None,
        collection: str | None = None,
        uploaded_by: str | None = None,
    ) -> Published:
        """Flip the new version live in one transaction (see publish_versions)."""
        item = (pending, content_hash, chunks, source_url, uploaded_by)
        return self.publish_versions([item], collection=collection)[0]

    def publish_versions(
        self, items: list[tuple[PendingVersion, str, int, str | None, str | None]], collection: str | None = None
    ) -> list[Published]:
        """Flip several new versions live in one transaction, as a compare-and-set.

        With `collection` (the Chroma collection the chunks were written to), nothing is published
        unless the KB still uses that collection: CollectionChanged is raised, nothing is written, and
        the versions stay in flight for the caller to write again or abandon. A KB that no longer
        exists raises RegistryConflict the same way.

        Each item is (pending, content hash, chunks, source URL, uploader): the uploader is stored with the
        version that goes live (None clears it: a version from the command line has no Slack uploader).

        Per version, it goes live only if it is still `processing` and its document still exists and
        has no newer live version; otherwise it ends `failed` here, with the reason in its Published
        (a document deleted meanwhile stays deleted). Either way every version leaves flight.
        """
        results: list[Published] = []
        old_chunks: dict[tuple[str, str], int] = {}  # (kb, document) -> chunks of the live version it replaces
        now = time.time()
        with self._transaction() as db:
            for kb in dict.fromkeys(pending.kb for pending, *_ in items):
                row = db.execute("SELECT collection FROM kbs WHERE name = ?", (kb,)).fetchone()
                if row is None:
                    raise RegistryConflict(f"knowledge base {kb!r} was deleted while this was being ingested")
                if collection is not None and row["collection"] != collection:
                    raise CollectionChanged(kb, collection, row["collection"])
            for pending, content_hash, chunks, source_url, uploaded_by in items:
                conflict = self._publish_conflict(db, pending)
                if conflict is not None:
                    db.execute(
                        "UPDATE versions SET state = 'failed' WHERE kb = ? AND document = ? AND version = ?",
                        (pending.kb, pending.document, pending.version),
                    )
                    results.append(Published(pending, None, conflict))
                    continue
                old = db.execute(
                    "SELECT live_version, live_chunks FROM documents WHERE kb = ? AND name = ?",
                    (pending.kb, pending.document),
                ).fetchone()
                if old is not None and old["live_version"] is not None:
                    old_chunks[(pending.kb, pending.document)] = int(old["live_chunks"])
                db.execute(
                    "UPDATE versions SET state = 'ready', chunks = ? WHERE kb = ? AND document = ? AND version = ?",
                    (chunks, pending.kb, pending.document, pending.version),
                )
                db.execute(
                    # `+state`: found by the document's key, never by versions_by_state (every ready version)
                    "UPDATE versions SET state = 'retired' WHERE kb = ? AND document = ? AND version != ?"
                    " AND +state = 'ready'",
                    (pending.kb, pending.document, pending.version),
                )
                db.execute(
                    """UPDATE documents SET state = 'ready', error = NULL, live_version = ?, live_hash = ?,
                       live_chunks = ?, source_url = COALESCE(?, source_url), uploaded_by = ?, updated_at = ?,
                       published_at = ? WHERE kb = ? AND name = ?""",
                    (
                        pending.version,
                        content_hash,
                        chunks,
                        source_url,
                        uploaded_by,
                        now,
                        now,
                        pending.kb,
                        pending.document,
                    ),
                )
                results.append(Published(pending, old["live_version"] if old else None))
            for kb in dict.fromkeys(r.pending.kb for r in results if r.live):
                mine = [(r, item[2]) for r, item in zip(results, items, strict=True) if r.live and r.pending.kb == kb]
                changes = {}
                for r, n in mine:
                    before_chunks = old_chunks.get((kb, r.pending.document), 0)
                    changes[r.pending.document] = LiveChange(r.replaced, before_chunks, r.pending.version, n)
                _log_live_changes(db, kb, changes)
                # The flip's last statement (fault tests stop inside the transaction right here).
                db.execute("UPDATE kbs SET generation = generation + 1 WHERE name = ?", (kb,))
        self.lease.release(len(items))
        return results

    @staticmethod
    def _publish_conflict(db: sqlite3.Connection, pending: PendingVersion) -> str | None:
        version = db.execute(
            "SELECT state FROM versions WHERE kb = ? AND document = ? AND version = ?",
            (pending.kb, pending.document, pending.version),
        ).fetchone()
        document = db.execute(
            "SELECT live_version FROM documents WHERE kb = ? AND name = ?", (pending.kb, pending.document)
        ).fetchone()
        if document is None:
            return "the document was deleted while it was being ingested"
        if version is None or version["state"] != "processing":
            return "this ingest was abandoned (taken for interrupted) before it could finish; ingest it again"
        if document["live_version"] is not None and document["live_version"] > pending.version:
            return "a newer version of it went live while this one was being ingested"
        return None

    def version_states(self, pendings: list[PendingVersion]) -> list[str | None]:
        """Each version's state now (None: forgotten), e.g. to learn whether a flip that raised committed."""
        with self._connect() as db:
            rows = [
                db.execute(
                    "SELECT state FROM versions WHERE kb = ? AND document = ? AND version = ?",
                    (p.kb, p.document, p.version),
                ).fetchone()
                for p in pendings
            ]
        return [r["state"] if r else None for r in rows]

    def abandon_version(self, pending: PendingVersion, reason: str) -> None:
        """A failed new version: the document keeps its live version, or is marked failed."""
        self.abandon_versions([pending], reason)

    def abandon_versions(self, pendings: list[PendingVersion], reason: str) -> None:
        with self._transaction() as db:
            for pending in pendings:
                self._abandon(db, pending.kb, pending.document, pending.version, reason)
        self.lease.release(len(pendings))

    @staticmethod
    def _abandon(db: sqlite3.Connection, kb: str, document: str, version: int, reason: str) -> None:
        cursor = db.execute(
            "UPDATE versions SET state = 'failed'"
            " WHERE kb = ? AND document = ? AND version = ? AND state = 'processing'",
            (kb, document, version),
        )
        if cursor.rowcount == 0:
            return  # settled already (published, or failed at its flip): a live version is never abandoned
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
        with self._connect() as db:  # the common case, nothing in flight, needs no write lock
            if (
                db.execute("SELECT 1 FROM versions WHERE kb = ? AND state = 'processing' LIMIT 1", (kb,)).fetchone()
                is None
            ):
                return []
        with self._transaction() as db:
            rows = db.execute(
                "SELECT document, version, pid, owner FROM versions WHERE kb = ? AND state = 'processing'", (kb,)
            ).fetchall()
            dead = [(r["document"], r["version"]) for r in rows if not self._owner_alive(r["owner"], r["pid"])]
            for document, version in dead:
                self._abandon(db, kb, document, version, "ingest was interrupted; upload the file again")
        return dead

    def _owner_alive(self, owner: str | None, pid: int | None) -> bool:
        return self.lease.holder_alive(owner) if owner else _pid_alive(pid)

    def stale_versions(self, kb: str) -> list[tuple[str, int]]:
        """Versions whose chunks may still be in the vector store but must never be retrieved."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT document, version FROM versions WHERE kb = ? AND state IN ('failed', 'retired')", (kb,)
            ).fetchall()
        return [(r["document"], r["version"]) for r in rows]

    def forget_versions(self, kb: str, versions: list[tuple[str, int]]) -> None:
        with self._transaction() as db:
            for table in ("versions", "unit_vectors"):
                db.executemany(
                    f"DELETE FROM {table} WHERE kb = ? AND document = ? AND version = ?",
                    [(kb, d, v) for d, v in versions],
                )

    # --- answer-unit vectors -----------------------------------------------------------------

    def save_unit_vectors(self, kb: str, model: str, rows: list[tuple[str, int, int, bytes]]) -> None:
        """(document, version, chunk index, vectors) for chunks of versions being written."""
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO unit_vectors (kb, document, version, chunk_index, model, vectors) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(kb, document, version, index, model, blob) for document, version, index, blob in rows],
            )

    def unit_vectors(
        self, kb: str, model: str, chunks: list[tuple[str, int, int]]
    ) -> dict[tuple[str, int, int], bytes]:
        """Saved vectors of (document, version, chunk index) computed with `model`; absent ones omitted."""
        found = {}
        with self._connect() as db:
            for document, version, index in chunks:
                row = db.execute(
                    "SELECT vectors FROM unit_vectors WHERE kb = ? AND document = ? AND version = ? "
                    "AND chunk_index = ? AND model = ?",
                    (kb, document, version, index, model),
                ).fetchone()
                if row is not None:
                    found[(document, version, index)] = row["vectors"]
        return found

    def clear_unit_vectors(self, kb: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM unit_vectors WHERE kb = ?", (kb,))

    def delete_document(self, kb: str, name: str) -> int | None:
        """Remove a document from the registry (it stops being retrievable at once)."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT live_version, live_chunks FROM documents WHERE kb = ? AND name = ?", (kb, name)
            ).fetchone()
            if row is None:
                return None
            # A version still being ingested is left to its ingest: its flip finds the document gone and
            # fails (the delete wins), and the ingest drops its own chunks.
            db.execute(
                "UPDATE versions SET state = 'retired' WHERE kb = ? AND document = ? AND state != 'processing'",
                (kb, name),
            )
            db.execute("DELETE FROM documents WHERE kb = ? AND name = ?", (kb, name))
            _log_live_changes(db, kb, {name: LiveChange(row["live_version"], int(row["live_chunks"]), None, 0)})
            db.execute("UPDATE kbs SET generation = generation + 1 WHERE name = ?", (kb,))
        return row["live_version"] or 0

    # --- stored manifests (access rules) -------------------------------------------------------

    def manifests(self) -> dict[str, ManifestRecord]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM kb_manifests ORDER BY kb").fetchall()
        return {row["kb"]: self._manifest(row) for row in rows}

    @staticmethod
    def _manifest(row: sqlite3.Row) -> ManifestRecord:
        manifest = None
        if row["visibility"] is not None:
            manifest = KnowledgeBaseManifest(
                name=row["kb"],
                description=row["description"],
                channels=tuple(json.loads(row["channels"])),
                visibility=row["visibility"],
                allowed_channels=tuple(json.loads(row["allowed_channels"])),
                uploaders=tuple(json.loads(row["uploaders"])),
                docs_dir=Path(row["path"]).parent / "docs" if row["path"] else None,
            )
        return ManifestRecord(row["kb"], row["source"], row["path"], manifest, row["problem"])

    def save_manifest(self, manifest: KnowledgeBaseManifest, source: str, path: str | None) -> None:
        """Store a readable manifest: its rules are now the KB's rules, and any earlier problem is cleared."""
        with self._transaction() as db:
            db.execute(
                """INSERT INTO kb_manifests (kb, source, path, description, visibility, channels, allowed_channels,
                                             uploaders, problem, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)
                   ON CONFLICT(kb) DO UPDATE SET source = excluded.source, path = excluded.path,
                       description = excluded.description, visibility = excluded.visibility,
                       channels = excluded.channels, allowed_channels = excluded.allowed_channels,
                       uploaders = excluded.uploaders, problem = NULL, updated_at = excluded.updated_at""",
                (
                    manifest.name,
                    source,
                    path,
                    manifest.description,
                    manifest.visibility,
                    json.dumps(list(manifest.channels)),
                    json.dumps(list(manifest.allowed_channels)),
                    json.dumps(list(manifest.uploaders)),
                    time.time(),
                ),
            )

    def note_manifest_problem(self, kb: str, problem: str, path: str | None) -> None:
        """The KB's declaration cannot be read: keep its stored rules (if any) and say why."""
        with self._transaction() as db:
            db.execute(
                """INSERT INTO kb_manifests (kb, source, path, problem, updated_at) VALUES (?, 'declared', ?, ?, ?)
                   ON CONFLICT(kb) DO UPDATE SET problem = excluded.problem,
                       path = COALESCE(kb_manifests.path, excluded.path), updated_at = excluded.updated_at""",
                (kb, path, problem, time.time()),
            )
