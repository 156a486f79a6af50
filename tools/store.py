"""Knowledge store: one Chroma collection per KB, the document registry, and keyword indexes.

Readers only ever see chunks of a document's live version (the registry decides), whatever is
physically in Chroma at that moment.

One writer per embedded store: the embedded Chroma (a PersistentClient under the data dir) is not
safe for several processes, so the first process to open it takes an exclusive lock on
`<data dir>/store.lock` for as long as it holds the client; any other process that needs Chroma is
refused with a message naming the holder. The registry (SQLite, WAL) is safe to share, and the Chroma
client opens lazily at the first Chroma access, so registry-only commands (`kbbot kb list`) run next
to a live bot. Several processes share one store through a Chroma server (CHROMA_HOST) instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import shutil
import sqlite3
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from tools.config import ToolSettings
from tools.keyword_index import DELTA_MAX_SHARE, DELTA_MIN_CHUNKS, KeywordIndex
from tools.registry import KbRecord, Registry

log = logging.getLogger(__name__)

LIVE_PAGE = 5000  # chunks per Chroma get() when reading a whole collection
UNIT_VECTORS_CACHED = 2048  # chunks whose answer-unit vectors are kept in memory (~15 kB each at 384 dimensions)


class KnowledgeBaseError(ValueError):
    """A KB operation that cannot be done; the message is for people."""


class EmbeddingModelMismatch(KnowledgeBaseError):
    pass


class CollectionMissing(KnowledgeBaseError):
    """The Chroma collection a KB's registry row names is gone (a reindex or a KB deletion dropped it)."""


@dataclass(frozen=True)
class StoredChunk:
    chunk_id: str
    kb: str
    document: str
    version: int
    index: int
    title: str
    location: str
    text: str
    source_url: str | None = None

    @cached_property  # read for every answer unit of the chunk, question after question
    def header(self) -> str:
        from tools.chunking import chunk_header

        return chunk_header(self.title, self.location)


def chunk_id_for(kb: str, document: str, version: int, index: int) -> str:
    return f"{kb}/{document}@v{version}#{index}"


def version_key(kb: str, document: str, version: int) -> str:
    return f"{kb}/{document}@v{version}"


def chunk_from_metadata(chunk_id: str, text: str, meta: dict) -> StoredChunk:
    return StoredChunk(
        chunk_id=chunk_id,
        kb=str(meta["kb"]),
        document=str(meta["document"]),
        version=int(meta["version"]),
        index=int(meta["index"]),
        title=str(meta.get("title") or meta["document"]),
        location=str(meta.get("location") or ""),
        text=text or "",
        source_url=(meta.get("source_url") or None),
    )


def chunk_to_node(chunk: StoredChunk, embedding: Sequence[float]):
    """A llama-index TextNode as ChromaVectorStore stores it; SOURCE is the version, so a version deletes as one."""
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    return TextNode(
        id_=chunk.chunk_id,
        text=chunk.text,
        embedding=list(embedding),
        metadata={
            "kb": chunk.kb,
            "document": chunk.document,
            "version": chunk.version,
            "index": chunk.index,
            "title": chunk.title,
            "location": chunk.location,
            "source_url": chunk.source_url or "",
        },
        relationships={
            NodeRelationship.SOURCE: RelatedNodeInfo(node_id=version_key(chunk.kb, chunk.document, chunk.version))
        },
    )


class DataDirLock:
    """This process owns the embedded Chroma store of a data dir: an exclusive flock on `store.lock`.

    Non-blocking: a second process gets a KnowledgeBaseError naming the holder (its pid and command,
    written into the file). One lock per process and data dir, counted, however many stores are open
    on it; the kernel drops it the moment its holder dies (kill -9 included).
    """

    FILE = "store.lock"
    _held: dict[Path, DataDirLock] = {}
    _guard = threading.Lock()

    def __init__(self, data_dir: Path, handle):  # noqa: ANN001 - an open file
        self.data_dir, self.handle, self.pid, self.count = data_dir, handle, os.getpid(), 1

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        import fcntl

        key = data_dir.resolve()
        with cls._guard:
            held = cls._held.get(key)
            if held is not None and held.pid == os.getpid():
                held.count += 1
                return held
            key.mkdir(parents=True, exist_ok=True)
            handle = (key / cls.FILE).open("a+", encoding="utf-8")
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read()
                handle.close()
                raise KnowledgeBaseError(_in_use_message(key, holder)) from None
            except BaseException:
                handle.close()
                raise
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"pid": os.getpid(), "command": _command_line(), "since": time.time()}))
            handle.flush()
            cls._held[key] = held = cls(key, handle)
            return held

    def release(self) -> None:
        with self._guard:
            if self.pid != os.getpid() or self.count <= 0:
                return  # a forked child never releases its parent's lock
            self.count -= 1
            if self.count == 0:
                self._held.pop(self.data_dir, None)
                with contextlib.suppress(OSError):
                    self.handle.close()  # closing the file drops the flock


def _command_line() -> str:
    argv = list(sys.argv) or ["python"]
    program = Path(argv[0]).name
    if program in ("kbbot", "cli.py", "__main__.py") or argv[0].endswith(("bot/cli.py", "bot.cli")):
        program = "kbbot"
    elif program == "-c":
        program = "python -c …"
    return " ".join([program, *(shlex.quote(a) for a in argv[1:5])])[:120]


def _holder_info(text: str) -> dict:
    try:
        info = json.loads(text)
        return {"pid": int(info["pid"]), "command": str(info.get("command") or "?")}
    except (ValueError, KeyError, TypeError):
        return {"pid": "?", "command": "?"}


def _in_use_message(data_dir: Path, holder_text: str) -> str:
    holder = _holder_info(holder_text)
    return (
        f"the data dir {data_dir} is in use by another kbbot process (pid {holder['pid']}, `{holder['command']}`): "
        f"stop it, or run a Chroma server (`chroma run --path {data_dir / 'chroma'}`) and set CHROMA_HOST so "
        "several processes share the store"
    )


def _unreachable(exc: BaseException) -> bool:
    """A Chroma server that does not answer (refused, reset, timed out), wherever in the chain."""
    import httpx

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, httpx.TransportError | ConnectionError | TimeoutError):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return False


def _short(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:200]


class _ChromaHandle:
    """The lazily opened client and the data-dir lock that goes with it; closed once (close or GC)."""

    def __init__(self) -> None:
        self.client = None
        self.lock: DataDirLock | None = None

    def close(self) -> None:
        client, lock = self.client, self.lock
        self.client = self.lock = None
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # closing must never mask the caller's own error
                log.debug("closing the Chroma client: %s", exc)
        if lock is not None:
            lock.release()


class KnowledgeStore:
    def __init__(self, settings: ToolSettings):
        self.settings = settings
        try:
            self.data_dir = settings.resolved_data_dir
            self.registry = Registry(self.data_dir / "registry.sqlite3")
        except (OSError, sqlite3.Error) as exc:
            raise KnowledgeBaseError(
                f"cannot open the kbbot data dir {settings.data_dir} (KBBOT_DATA_DIR): {exc}"
            ) from exc
        self._keyword: dict[str, tuple[int, KeywordIndex]] = {}
        self._live: dict[str, tuple[int, dict[str, int], int]] = {}
        self._collections: dict[str, object] = {}
        self._unit_vectors: OrderedDict[tuple[str, int, StoredChunk], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._kb_locks: dict[str, threading.Lock] = {}
        self._open_lock = threading.Lock()
        self._closed = False
        self._handle = _ChromaHandle()
        self._finalizer = weakref.finalize(self, self._handle.close)
        # Registry-only recovery now (a dead ingest's versions are abandoned); deleting their chunks
        # needs Chroma and waits for its first use.
        self._recover_registry()

    @property
    def client(self):
        """The Chroma client, opened at first use (embedded: taking the data dir's lock)."""
        client = self._handle.client
        if client is not None:
            return client
        with self._open_lock:
            if self._closed:
                raise KnowledgeBaseError("the knowledge store was closed")
            if self._handle.client is None:
                self._open_client()
                self.recover_all()  # whatever process died mid-ingest, its leftovers go now
            return self._handle.client

    @property
    def chroma_open(self) -> bool:
        return self._handle.client is not None

    def open(self) -> KnowledgeStore:
        """Open the Chroma client now (e.g. at a bot's start, to own the embedded store from then on)."""
        _ = self.client
        return self

    def _open_client(self) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        if self.settings.chroma_host:
            try:
                self._handle.client = chromadb.HttpClient(
                    host=self.settings.chroma_host, port=self.settings.chroma_port, settings=chroma_settings
                )
            except Exception as exc:  # chromadb raises ValueError/httpx errors/its own types for these
                raise KnowledgeBaseError(self._unreachable_message(exc)) from exc
            return
        lock = DataDirLock.acquire(self.data_dir)
        try:
            self._handle.client = chromadb.PersistentClient(
                path=str(self.data_dir / "chroma"), settings=chroma_settings
            )
        except Exception as exc:
            lock.release()
            raise KnowledgeBaseError(
                f"cannot open the Chroma store in {self.data_dir / 'chroma'}: {_short(exc)}"
            ) from exc
        self._handle.lock = lock

    def _unreachable_message(self, exc: BaseException) -> str:
        where = f"{self.settings.chroma_host}:{self.settings.chroma_port}"
        return (
            f"the Chroma server at {where} is unreachable (CHROMA_HOST/CHROMA_PORT): {_short(exc)}; start it "
            f"(`chroma run --path DIR --port {self.settings.chroma_port}`) and try again, kbbot reconnects by itself"
        )

    @contextlib.contextmanager
    def chroma_errors(self) -> Iterator[None]:
        """Around any Chroma call: a server that stopped answering becomes one clear KnowledgeBaseError."""
        try:
            yield
        except KnowledgeBaseError:
            raise
        except Exception as exc:
            if self.settings.chroma_host and _unreachable(exc):
                raise KnowledgeBaseError(self._unreachable_message(exc)) from exc
            raise

    def close(self) -> None:
        """Release the Chroma client (files, connections, the data dir's lock). The store is unusable afterwards."""
        with self._open_lock:
            self._closed = True
            self._collections.clear()
            self._finalizer()
        self.registry.close()

    def _kb_lock(self, kb: str) -> threading.Lock:
        with self._lock:
            return self._kb_locks.setdefault(kb, threading.Lock())

    # --- knowledge bases ---------------------------------------------------------------------

    def ensure_kb(self, name: str, description: str, model_name: str, dimension: int) -> KbRecord:
        """Create the KB (registry row + collection) if needed; refuse a different embedding model."""
        record = self.registry.get_kb(name)
        if record is None:
            # Named by its starting generation: a KB created again under an old name gets a new
            # collection, and a process still holding the old one's handle never uses it again.
            collection = f"kbbot_{name}_g{self.registry.generation_floor(name)}"
            with self.chroma_errors():
                self._collection(collection, model_name, dimension)
            self.registry.upsert_kb(name, description, model_name, dimension, collection)
            record = self.registry.get_kb(name)
            assert record is not None
        elif description and description != record.description:
            self.registry.upsert_kb(name, description, record.embedding_model, record.dimension, record.collection)
        self.check_model(name, model_name, dimension)
        self.recover(name)
        return self.registry.get_kb(name)  # type: ignore[return-value]

    def require_kb(self, name: str) -> KbRecord:
        record = self.registry.get_kb(name)
        if record is None:
            known = ", ".join(k.name for k in self.registry.list_kbs()) or "none yet"
            raise KnowledgeBaseError(f"no knowledge base named {name!r} (known: {known})")
        return record

    def model_mismatch(self, kb: str, model_name: str, dimension: int) -> str | None:
        """Why `kb` cannot be searched or written with this embedding model, or None when it can.

        Cheap enough to call before every probe: one registry read, and the collection's own metadata
        only when this process already opened the collection (never a Chroma round-trip). The reason
        is one line for people, naming `kbbot kb reindex KB`. Raises KnowledgeBaseError for an unknown KB.
        """
        record = self.require_kb(kb)
        indexed = (record.embedding_model, record.dimension)
        collection = self._collections.get(record.collection)
        metadata = (getattr(collection, "metadata", None) or {}) if collection is not None else {}
        if metadata.get("embedding_model") and indexed == (model_name, dimension):
            indexed = (str(metadata["embedding_model"]), int(metadata.get("dimension") or 0))
        if indexed == (model_name, dimension):
            return None
        return (
            f"knowledge base {kb!r} was indexed with {indexed[0]} ({indexed[1]}-d) but "
            f"kbbot is configured for {model_name} ({dimension}-d); run `kbbot kb reindex {kb}` to "
            "re-embed it, or switch the embedding settings back"
        )

    def check_model(self, name: str, model_name: str, dimension: int) -> None:
        """Refuse to mix embedding models: the registry and the collection must both match."""
        self.collection(name)  # its metadata (a collection another deployment built) counts too
        reason = self.model_mismatch(name, model_name, dimension)
        if reason:
            raise EmbeddingModelMismatch(reason)

    def _collection(self, collection_name: str, model_name: str | None = None, dimension: int | None = None):
        metadata = {"hnsw:space": "cosine"}
        if model_name:
            metadata |= {"embedding_model": model_name, "dimension": int(dimension or 0)}
        # embedding_function=None: kbbot always passes vectors; Chroma's default would download a model.
        return self.client.get_or_create_collection(collection_name, metadata=metadata, embedding_function=None)

    def collection(self, kb: str):
        return self.collection_named(self.require_kb(kb).collection)

    def collection_named(self, name: str, create: bool = True):
        """A collection by its Chroma name (as the registry records it), handle cached.

        create=False never brings back a collection someone deleted (a reindex, a KB deletion): it
        raises KnowledgeBaseError instead."""
        handle = self._collections.get(name)
        if handle is None:
            with self.chroma_errors():
                if create:
                    handle = self._collection(name)
                else:
                    try:
                        handle = self.client.get_collection(name, embedding_function=None)
                    except Exception as exc:
                        if self.settings.chroma_host and _unreachable(exc):
                            raise
                        raise CollectionMissing(f"the Chroma collection {name} does not exist (any more)") from exc
            self._collections[name] = handle
        return handle

    def vector_store(self, kb: str, collection: str | None = None, create: bool = True):
        """llama-index's view of the KB's collection (or of `collection`, a name the registry recorded)."""
        from llama_index.vector_stores.chroma import ChromaVectorStore

        name = collection or self.require_kb(kb).collection
        return ChromaVectorStore(chroma_collection=self.collection_named(name, create=create))

    def forget_collection(self, name: str) -> None:
        """Drop a cached handle (the collection was deleted, e.g. by a reindex in another process)."""
        self._collections.pop(name, None)

    def delete_kb(self, name: str) -> None:
        record = self.require_kb(name)
        self.registry.delete_kb(name)
        with self._lock:  # a KB created again under this name shares none of these
            self._collections.pop(record.collection, None)
            self._live.pop(name, None)
            self._keyword.pop(name, None)
        try:
            with self.chroma_errors():
                self.client.delete_collection(record.collection)
        except Exception as exc:  # already gone is fine; unreachable: an invisible leftover
            log.debug("delete_collection %s: %s", record.collection, exc)
        shutil.rmtree(self._keyword_dir(name), ignore_errors=True)

    # --- recovery ----------------------------------------------------------------------------

    def _recover_registry(self) -> None:
        """Registry only (no Chroma): versions left `processing` by dead processes are abandoned."""
        for record in self.registry.list_kbs():
            try:
                self.registry.recover_interrupted(record.name)
            except sqlite3.Error as exc:  # retried at the next open
                log.warning("could not recover interrupted ingests of %s: %s", record.name, exc)

    def recover_all(self) -> None:
        """Run at the first Chroma use of every store: whatever process died mid-ingest, its leftovers go now."""
        for record in self.registry.list_kbs():
            try:
                self.recover(record.name)
            except Exception as exc:  # a KB that cannot be cleaned now is cleaned at its next open
                log.warning("could not clean up interrupted ingests of %s: %s", record.name, exc)

    def recover(self, kb: str) -> None:
        """Abandon versions of dead ingests and delete chunks that may never be retrieved.

        Those chunks are invisible already (the registry never points at them); this removes them.
        A version is forgotten only after its chunks are deleted, so a failure here is retried later.
        """
        self.registry.recover_interrupted(kb)
        stale = self.registry.stale_versions(kb)
        if not stale:
            return
        vector_store = self.vector_store(kb)
        for document, version in stale:
            with self.chroma_errors():
                vector_store.delete(version_key(kb, document, version))
            self.registry.forget_versions(kb, [(document, version)])

    # --- reading -----------------------------------------------------------------------------

    def live_versions(self, kb: str) -> dict[str, int]:
        return self._live_state(kb)[0]

    def _live_state(self, kb: str) -> tuple[dict[str, int], int]:
        return self._live_snapshot(kb)[1:]  # type: ignore[return-value]

    def _live_snapshot(self, kb: str) -> tuple[int, dict[str, int], int]:
        """(generation, {document: live version}, live chunks), all of the same registry state: the previous
        generation's caught up from the registry's log of changes when it can be (a publish into a KB of half a
        million documents then costs a copy of the map, not a read of every row), else read whole."""
        generation = self.registry.generation(kb)
        cached = self._live.get(kb)
        if cached is None or cached[0] != generation:
            cached = (self._live_caught_up(kb, cached) if cached else None) or self.registry.live_snapshot(kb)
            self._live[kb] = cached
        return cached

    def _live_caught_up(
        self, kb: str, cached: tuple[int, dict[str, int], int]
    ) -> tuple[int, dict[str, int], int] | None:
        """The cached live map brought to the registry's generation with its log; None when the log cannot tell
        or disagrees with the map (then the caller reads every row)."""
        logged = self.registry.live_changes(kb, cached[0])
        if logged is None:
            return None
        generation, changes = logged
        live, total = dict(cached[1]), cached[2]  # a copy: readers of the cached map go on using it
        for document, change in changes.items():
            if live.get(document) != change.before or (change.before is not None and change.before_chunks is None):
                return None
            total -= change.before_chunks or 0
            if change.after is None:
                live.pop(document, None)
            else:
                live[document] = change.after
                total += change.after_chunks
        return generation, live, total

    def save_unit_vectors(
        self, kb: str, model: str, chunks: Sequence[StoredChunk], vectors: Sequence[np.ndarray]
    ) -> None:
        """Each chunk's answer-unit vectors (float16: only their ranking matters)."""
        self.registry.save_unit_vectors(
            kb,
            model,
            [
                (chunk.document, chunk.version, chunk.index, np.ascontiguousarray(v, dtype=np.float16).tobytes())
                for chunk, v in zip(chunks, vectors, strict=True)
            ],
        )

    def unit_vectors(self, model: str, dimension: int, chunks: Sequence[StoredChunk]) -> dict[str, np.ndarray]:
        """chunk id → (units × dimension) vectors saved at ingest with `model`; chunks without are left out.
        Read-only arrays: the ones found are kept (UNIT_VECTORS_CACHED chunks), keyed by the whole chunk —
        its id, version, text and header — and the model, so a changed chunk is never answered with old ones."""
        found: dict[str, np.ndarray] = {}
        missing: list[StoredChunk] = []
        with self._lock:
            for chunk in chunks:
                vectors = self._unit_vectors.get((model, dimension, chunk))
                if vectors is None:
                    missing.append(chunk)
                else:
                    self._unit_vectors.move_to_end((model, dimension, chunk))
                    found[chunk.chunk_id] = vectors
        for kb in {c.kb for c in missing}:
            mine = [c for c in missing if c.kb == kb]
            blobs = self.registry.unit_vectors(kb, model, [(c.document, c.version, c.index) for c in mine])
            for chunk in mine:
                blob = blobs.get((chunk.document, chunk.version, chunk.index))
                if blob is not None and len(blob) % (2 * dimension) == 0:
                    vectors = np.frombuffer(blob, dtype=np.float16).reshape(-1, dimension).astype(np.float32)
                    vectors.flags.writeable = False
                    found[chunk.chunk_id] = vectors
                    with self._lock:
                        self._unit_vectors[(model, dimension, chunk)] = vectors
                        while len(self._unit_vectors) > UNIT_VECTORS_CACHED:
                            self._unit_vectors.popitem(last=False)
        return found

    def live_chunks(self, kb: str) -> list[StoredChunk]:
        return self._live_chunks(kb, self._live_snapshot(kb)[1])

    def _live_chunks(self, kb: str, live: dict[str, int]) -> list[StoredChunk]:
        # In pages: one get() of a whole collection fails past ~60k chunks in embedded Chroma ("too many SQL
        # variables", docs/benchmarks.md, Scale).
        chunks: list[StoredChunk] = []
        seen: set[str] = set()
        collection = self.collection(kb)
        offset = 0
        while True:
            with self.chroma_errors():
                result = collection.get(include=["documents", "metadatas"], limit=LIVE_PAGE, offset=offset)
            for cid, text, meta in zip(result["ids"], result["documents"], result["metadatas"], strict=True):
                chunk = chunk_from_metadata(cid, text, meta)
                if live.get(chunk.document) == chunk.version and cid not in seen:
                    seen.add(cid)
                    chunks.append(chunk)
            offset += len(result["ids"])
            if len(result["ids"]) < LIVE_PAGE:
                break
        chunks.sort(key=lambda c: (c.document, c.index))
        return chunks

    def get_chunks(self, kb: str, chunk_ids: list[str]) -> list[StoredChunk]:
        if not chunk_ids:
            return []
        live = self.live_versions(kb)
        with self.chroma_errors():
            result = self.collection(kb).get(ids=chunk_ids, include=["documents", "metadatas"])
        by_id = {
            cid: chunk_from_metadata(cid, text, meta)
            for cid, text, meta in zip(result["ids"], result["documents"], result["metadatas"], strict=True)
        }
        return [by_id[c] for c in chunk_ids if c in by_id and live.get(by_id[c].document) == by_id[c].version]

    def get_chunks_with_vectors(self, kb: str, chunk_ids: list[str]) -> list[tuple[StoredChunk, np.ndarray]]:
        """Live chunks among `chunk_ids` with their stored vectors (any order; absent ones left out)."""
        if not chunk_ids:
            return []
        live = self.live_versions(kb)
        with self.chroma_errors():
            result = self.collection(kb).get(ids=chunk_ids, include=["documents", "metadatas", "embeddings"])
        pairs = []
        for cid, text, meta, vector in zip(
            result["ids"], result["documents"], result["metadatas"], result["embeddings"], strict=True
        ):
            chunk = chunk_from_metadata(cid, text, meta)
            if live.get(chunk.document) == chunk.version:
                pairs.append((chunk, np.asarray(vector, dtype=np.float32)))
        return pairs

    def dense_search(self, kb: str, query_vector: np.ndarray, k: int) -> list[tuple[StoredChunk, float]]:
        """(chunk, cosine similarity) best first, live chunks only.

        Chunks that are not live (a version being ingested right now, leftovers awaiting cleanup) are
        in the collection too; the query asks for enough extra hits that k live ones still come back.
        """
        record = self.require_kb(kb)
        if len(query_vector) != record.dimension:
            raise EmbeddingModelMismatch(
                f"knowledge base {kb!r} holds {record.dimension}-d vectors ({record.embedding_model}) but the query "
                f"vector is {len(query_vector)}-d; run `kbbot kb reindex {kb}` or switch the embedding settings back"
            )
        live, live_total = self._live_state(kb)
        with self.chroma_errors():
            collection = self.collection(kb)
            count = collection.count()
            if count == 0 or not live:
                return []
            wanted = min(count, k + max(0, count - live_total))
            result = collection.query(
                query_embeddings=[query_vector.tolist()],
                n_results=wanted,
                include=["documents", "metadatas", "distances"],
            )
        hits = []
        for cid, text, meta, distance in zip(
            result["ids"][0], result["documents"][0], result["metadatas"][0], result["distances"][0], strict=True
        ):
            chunk = chunk_from_metadata(cid, text, meta)
            if live.get(chunk.document) == chunk.version:
                hits.append((chunk, 1.0 - float(distance)))
        return hits[:k]

    # --- keyword index -----------------------------------------------------------------------

    def _keyword_dir(self, kb: str) -> Path:
        return self.data_dir / "keyword" / kb

    def keyword_dir(self, kb: str) -> Path:
        """Where the KB's keyword index (and the searcher's saved vectors) live; removed with the KB."""
        return self._keyword_dir(kb)

    def keyword_index(self, kb: str) -> KeywordIndex:
        """The KB's BM25 index for its current generation: from memory, from disk, or rebuilt.

        Builds of one KB are serialised in this process (per-KB lock) and saved atomically under a
        unique temporary name, so an ingest and a question (or two processes sharing a Chroma server)
        rebuilding the same generation never collide, and a reader never loads half an index.
        """
        generation = self.registry.generation(kb)
        cached = self._keyword.get(kb)
        if cached and cached[0] == generation:
            return cached[1]
        with self._kb_lock(kb):
            cached = self._keyword.get(kb)
            if cached and cached[0] >= generation:
                return cached[1]
            index = None
            try:
                index = KeywordIndex.load(self._keyword_dir(kb) / f"g{generation}")
            except Exception as exc:  # a torn or old-format index is rebuilt, never trusted
                log.warning("rebuilding keyword index for %s: %s", kb, exc)
            if index is None:
                generation, index = self._update_or_build_keyword_index(kb, cached)
            self._keyword[kb] = (generation, index)
            return index

    def rebuild_keyword_index(self, kb: str, generation: int | None = None) -> KeywordIndex:
        """Build (and save) the index of the KB's current live chunks, e.g. right after a publish.

        `generation` is accepted for compatibility; the index is always labelled with the generation
        its chunks were read at.
        """
        with self._kb_lock(kb):
            current = self.registry.generation(kb)
            cached = self._keyword.get(kb)
            if cached and cached[0] >= current:
                return cached[1]  # a question built it already
            built_at, index = self._update_or_build_keyword_index(kb, cached)
            self._keyword[kb] = (built_at, index)
            return index

    def _update_or_build_keyword_index(
        self, kb: str, previous: tuple[int, KeywordIndex] | None
    ) -> tuple[int, KeywordIndex]:
        """The index of the current generation: the previous one (in memory, else the newest saved) plus the
        chunks of versions published since and minus those retired, or a full rebuild when that cannot be
        done or the delta grew too large (tools/keyword_index.py)."""
        if previous is None:
            previous = self._newest_saved_keyword_index(kb)
        if previous is not None:
            try:
                updated = self._update_keyword_index(kb, previous)
            except Exception as exc:  # whatever went wrong, a rebuild is always right
                log.warning("keyword index of %s rebuilt instead of updated: %s", kb, exc)
                updated = None
            if updated is not None:
                return updated
        return self._build_keyword_index(kb)

    def _newest_saved_keyword_index(self, kb: str) -> tuple[int, KeywordIndex] | None:
        """(its generation, the index) of the newest index saved for the KB, if any loads."""
        saved = [d for d in self._keyword_dir(kb).glob("g*") if d.name[1:].isdigit()]
        for directory in sorted(saved, key=lambda d: int(d.name[1:]), reverse=True)[:1]:
            try:
                index = KeywordIndex.load(directory)
                return None if index is None else (int(directory.name[1:]), index)
            except Exception as exc:
                log.warning("saved keyword index %s not used: %s", directory, exc)
        return None

    def _update_keyword_index(self, kb: str, since: tuple[int, KeywordIndex]) -> tuple[int, KeywordIndex] | None:
        previous = since[1]
        changed = self._keyword_changes(kb, since)
        if changed is None:  # not logged: every live document's row, compared with the index's versions
            generation, live = self.registry.live_chunk_counts(kb)
            wanted = {version_key(kb, d, v): (d, v, n) for d, (v, n) in live.items()}
            have = previous.live_versions()
            added = [wanted[key] for key in wanted if key not in have]
            removed = have - wanted.keys()
        else:
            generation, added, removed = changed
        ids = [chunk_id_for(kb, d, v, i) for d, v, n in added for i in range(n)]
        if not previous.chunk_ids or len(ids) + previous.delta_size > max(
            DELTA_MIN_CHUNKS, DELTA_MAX_SHARE * previous.base_size
        ):
            return None
        chunks = self._chunks_by_id(kb, ids)
        if len(chunks) != len(ids):
            return None  # the registry and the collection disagree right now: a rebuild reads what is there
        index = previous.updated(ids, [f"{c.header}\n{c.text}" for c in chunks], removed)
        if index.wants_rebuild():
            return None
        self._save_keyword_index(kb, generation, index)
        return generation, index

    def _keyword_changes(
        self, kb: str, since: tuple[int, KeywordIndex]
    ) -> tuple[int, list[tuple[str, int, int]], set[str]] | None:
        """(generation, versions to add as (document, version, chunks), version keys to retire) from the
        registry's log of what changed after the index's generation: the documents that changed only, not every
        document's row. None when that cannot be told (a generation not logged, or the index does not hold
        what the log says it should): the caller compares every row."""
        generation, index = since
        logged = self.registry.live_changes(kb, generation)
        if logged is None:
            return None
        now, changes = logged
        added: list[tuple[str, int, int]] = []
        removed: set[str] = set()
        for document, change in changes.items():
            if change.before == change.after:
                continue
            if change.before is not None:
                if not index.holds_version(version_key(kb, document, change.before)):
                    return None
                removed.add(version_key(kb, document, change.before))
            if change.after is not None:
                if index.holds_version(version_key(kb, document, change.after)):
                    return None
                added.append((document, change.after, change.after_chunks))
        return now, added, removed

    def _chunks_by_id(self, kb: str, ids: list[str]) -> list[StoredChunk]:
        """The chunks with these ids, in this order (absent ones left out)."""
        found: dict[str, StoredChunk] = {}
        for start in range(0, len(ids), 5000):
            part = ids[start : start + 5000]
            with self.chroma_errors():
                result = self.collection(kb).get(ids=part, include=["documents", "metadatas"])
            for cid, text, meta in zip(result["ids"], result["documents"], result["metadatas"], strict=True):
                found[cid] = chunk_from_metadata(cid, text, meta)
        return [found[c] for c in ids if c in found]

    def _build_keyword_index(self, kb: str) -> tuple[int, KeywordIndex]:
        for _attempt in range(3):
            generation, live, total = self.registry.live_snapshot(kb)
            chunks = self._live_chunks(kb, live)
            # Pages read while a cleanup deleted rows before them can skip some: read again then.
            if len(chunks) >= total or self.registry.generation(kb) != generation:
                break
        index = KeywordIndex.build([c.chunk_id for c in chunks], [f"{c.header}\n{c.text}" for c in chunks])
        self._save_keyword_index(kb, generation, index)
        return generation, index

    def _save_keyword_index(self, kb: str, generation: int, index: KeywordIndex) -> None:
        root = self._keyword_dir(kb)
        if self.registry.generation(kb) == generation:  # an older generation's index is never saved
            index.save(root / f"g{generation}")
            for old in root.glob("g*"):
                if old.name[1:].isdigit() and int(old.name[1:]) < generation:
                    shutil.rmtree(old, ignore_errors=True)
