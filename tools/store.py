"""Knowledge store: one Chroma collection per KB, the document registry, and keyword indexes.

Readers only ever see chunks of a document's live version (the registry decides), whatever is
physically in Chroma at that moment.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tools.config import ToolSettings
from tools.keyword_index import KeywordIndex
from tools.registry import KbRecord, Registry

log = logging.getLogger(__name__)


class KnowledgeBaseError(ValueError):
    """A KB operation that cannot be done; the message is for people."""


class EmbeddingModelMismatch(KnowledgeBaseError):
    pass


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

    @property
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


class KnowledgeStore:
    def __init__(self, settings: ToolSettings):
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        self.settings = settings
        try:
            self.data_dir = settings.resolved_data_dir
            self.registry = Registry(self.data_dir / "registry.sqlite3")
        except (OSError, sqlite3.Error) as exc:
            raise KnowledgeBaseError(
                f"cannot open the kbbot data dir {settings.data_dir} (KBBOT_DATA_DIR): {exc}"
            ) from exc
        chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        try:
            if settings.chroma_host:
                self.client = chromadb.HttpClient(
                    host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
                )
            else:
                self.client = chromadb.PersistentClient(path=str(self.data_dir / "chroma"), settings=chroma_settings)
        except Exception as exc:  # chromadb raises ValueError/RuntimeError/its own types for these
            where = (
                f"the Chroma server at {settings.chroma_host}:{settings.chroma_port} (CHROMA_HOST/CHROMA_PORT)"
                if settings.chroma_host else f"the Chroma store in {self.data_dir / 'chroma'}"
            )
            raise KnowledgeBaseError(f"cannot open {where}: {' '.join(str(exc).split())[:200]}") from exc
        self._keyword: dict[str, tuple[int, KeywordIndex]] = {}
        self._live: dict[str, tuple[int, dict[str, int]]] = {}
        self._collections: dict[str, object] = {}
        self._lock = threading.Lock()
        self.recover_all()

    def close(self) -> None:
        """Release the Chroma client (files, connections). The store is unusable afterwards."""
        self._collections.clear()
        self.registry.close()
        close = getattr(self.client, "close", None)
        if close is not None:
            try:
                close()
            except Exception as exc:  # closing must never mask the caller's own error
                log.debug("closing the Chroma client: %s", exc)

    # --- knowledge bases ---------------------------------------------------------------------

    def ensure_kb(self, name: str, description: str, model_name: str, dimension: int) -> KbRecord:
        """Create the KB (registry row + collection) if needed; refuse a different embedding model."""
        record = self.registry.get_kb(name)
        if record is None:
            # Named by its starting generation: a KB created again under an old name gets a new
            # collection, and a process still holding the old one's handle never uses it again.
            collection = f"kbbot_{name}_g{self.registry.generation_floor(name)}"
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

    def check_model(self, name: str, model_name: str, dimension: int) -> None:
        """Refuse to mix embedding models: the registry and the collection must both match."""
        record = self.require_kb(name)
        indexed = (record.embedding_model, record.dimension)
        metadata = self.collection(name).metadata or {}
        if metadata.get("embedding_model") and indexed == (model_name, dimension):
            indexed = (str(metadata["embedding_model"]), int(metadata.get("dimension") or 0))
        if indexed != (model_name, dimension):
            raise EmbeddingModelMismatch(
                f"knowledge base {name!r} was indexed with {indexed[0]} ({indexed[1]}-d) but "
                f"kbbot is configured for {model_name} ({dimension}-d); run `kbbot kb reindex {name}` to "
                "re-embed it, or switch the embedding settings back"
            )

    def _collection(self, collection_name: str, model_name: str | None = None, dimension: int | None = None):
        metadata = {"hnsw:space": "cosine"}
        if model_name:
            metadata |= {"embedding_model": model_name, "dimension": int(dimension or 0)}
        # embedding_function=None: kbbot always passes vectors; Chroma's default would download a model.
        return self.client.get_or_create_collection(collection_name, metadata=metadata, embedding_function=None)

    def collection(self, kb: str):
        name = self.require_kb(kb).collection
        if name not in self._collections:
            self._collections[name] = self._collection(name)
        return self._collections[name]

    def vector_store(self, kb: str):
        from llama_index.vector_stores.chroma import ChromaVectorStore

        return ChromaVectorStore(chroma_collection=self.collection(kb))

    def delete_kb(self, name: str) -> None:
        record = self.require_kb(name)
        self.registry.delete_kb(name)
        with self._lock:  # a KB created again under this name shares none of these
            self._collections.pop(record.collection, None)
            self._live.pop(name, None)
            self._keyword.pop(name, None)
        try:
            self.client.delete_collection(record.collection)
        except Exception as exc:  # already gone is fine
            log.debug("delete_collection %s: %s", record.collection, exc)
        shutil.rmtree(self._keyword_dir(name), ignore_errors=True)

    # --- recovery ----------------------------------------------------------------------------

    def recover_all(self) -> None:
        """Run at every open of the store: whatever process died mid-ingest, its leftovers go now."""
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
            vector_store.delete(version_key(kb, document, version))
            self.registry.forget_versions(kb, [(document, version)])

    # --- reading -----------------------------------------------------------------------------

    def live_versions(self, kb: str) -> dict[str, int]:
        return self._live_state(kb)[0]

    def _live_state(self, kb: str) -> tuple[dict[str, int], int]:
        generation = self.registry.generation(kb)
        cached = self._live.get(kb)
        if cached is None or cached[0] != generation:
            cached = (generation, *self.registry.live_state(kb))
            self._live[kb] = cached
        return cached[1], cached[2]

    def save_unit_vectors(self, kb: str, model: str, chunks: Sequence[StoredChunk], vectors: Sequence[np.ndarray]) -> None:
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
        """chunk id → (units × dimension) vectors saved at ingest with `model`; chunks without are left out."""
        found: dict[str, np.ndarray] = {}
        for kb in {c.kb for c in chunks}:
            mine = [c for c in chunks if c.kb == kb]
            blobs = self.registry.unit_vectors(kb, model, [(c.document, c.version, c.index) for c in mine])
            for chunk in mine:
                blob = blobs.get((chunk.document, chunk.version, chunk.index))
                if blob is not None and len(blob) % (2 * dimension) == 0:
                    found[chunk.chunk_id] = np.frombuffer(blob, dtype=np.float16).reshape(-1, dimension).astype(np.float32)
        return found

    def live_chunks(self, kb: str) -> list[StoredChunk]:
        live = self.live_versions(kb)
        result = self.collection(kb).get(include=["documents", "metadatas"])
        chunks = [
            chunk_from_metadata(cid, text, meta)
            for cid, text, meta in zip(result["ids"], result["documents"], result["metadatas"], strict=True)
        ]
        chunks = [c for c in chunks if live.get(c.document) == c.version]
        chunks.sort(key=lambda c: (c.document, c.index))
        return chunks

    def get_chunks(self, kb: str, chunk_ids: list[str]) -> list[StoredChunk]:
        if not chunk_ids:
            return []
        live = self.live_versions(kb)
        result = self.collection(kb).get(ids=chunk_ids, include=["documents", "metadatas"])
        by_id = {
            cid: chunk_from_metadata(cid, text, meta)
            for cid, text, meta in zip(result["ids"], result["documents"], result["metadatas"], strict=True)
        }
        return [by_id[c] for c in chunk_ids if c in by_id and live.get(by_id[c].document) == by_id[c].version]

    def get_chunks_with_vectors(self, kb: str, chunk_ids: list[str]) -> list[tuple[StoredChunk, np.ndarray]]:
        live = self.live_versions(kb)
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
        collection = self.collection(kb)
        count = collection.count()
        if count == 0 or not live:
            return []
        wanted = min(count, k + max(0, count - live_total))
        result = collection.query(
            query_embeddings=[query_vector.tolist()], n_results=wanted, include=["documents", "metadatas", "distances"]
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

    def keyword_index(self, kb: str) -> KeywordIndex:
        """The KB's BM25 index for its current generation: from memory, from disk, or rebuilt."""
        generation = self.registry.generation(kb)
        cached = self._keyword.get(kb)
        if cached and cached[0] == generation:
            return cached[1]
        with self._lock:
            cached = self._keyword.get(kb)
            if cached and cached[0] == generation:
                return cached[1]
            directory = self._keyword_dir(kb) / f"g{generation}"
            index = None
            try:
                index = KeywordIndex.load(directory)
            except Exception as exc:  # a torn or old-format index is rebuilt, never trusted
                log.warning("rebuilding keyword index for %s: %s", kb, exc)
            if index is None:
                index = self.rebuild_keyword_index(kb, generation)
            self._keyword[kb] = (generation, index)
            return index

    def rebuild_keyword_index(self, kb: str, generation: int | None = None) -> KeywordIndex:
        generation = self.registry.generation(kb) if generation is None else generation
        chunks = self.live_chunks(kb)
        index = KeywordIndex.build([c.chunk_id for c in chunks], [f"{c.header}\n{c.text}" for c in chunks])
        directory = self._keyword_dir(kb) / f"g{generation}"
        index.save(directory)
        for old in self._keyword_dir(kb).glob("g*"):
            if old.name != directory.name and not old.name.endswith(".tmp"):
                shutil.rmtree(old, ignore_errors=True)
        return index
