"""The knowledge service: one object that wires settings, store, embedder, ingestion and manifests.

Every surface (CLI, Slack, eval) goes through it, so they all see the same KBs the same way.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from bot.config import Settings
from tools.embeddings import Embedder, embed_chunks, embedding_identity, get_embedder
from tools.ingest import Ingestor, IngestReport
from tools.manifests import KnowledgeBaseManifest, discover_manifests, validate_kb_name
from tools.store import KnowledgeBaseError, KnowledgeStore, chunk_to_node

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KbSummary:
    name: str
    description: str
    documents: int
    ready_documents: int
    chunks: int
    embedding_model: str | None

    def to_json(self) -> dict:
        return self.__dict__.copy()


class KnowledgeService:
    def __init__(self, settings: Settings):
        self.settings = settings

    def close(self) -> None:
        """Release the store (Chroma client) if it was opened; the embedder stays cached per process."""
        store = self.__dict__.pop("store", None)
        self.__dict__.pop("ingestor", None)
        if store is not None:
            store.close()

    def __enter__(self) -> KnowledgeService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @cached_property
    def store(self) -> KnowledgeStore:
        return KnowledgeStore(self.settings)

    @cached_property
    def embedder(self) -> Embedder:
        return get_embedder(self.settings)

    @cached_property
    def ingestor(self) -> Ingestor:
        # The embedder is handed over lazily: a sync where nothing changed never loads the model.
        return Ingestor(self.settings, self.store, lambda: self.embedder, self.embedding_identity)

    @cached_property
    def embedding_identity(self) -> tuple[str, int]:
        known = embedding_identity(self.settings)
        return known if known else (self.embedder.model_name, self.embedder.dimension)

    # --- knowledge bases ---------------------------------------------------------------------

    def declared(self, strict: bool = False) -> dict[str, KnowledgeBaseManifest]:
        """Declared KBs by name. A broken kb.toml is logged and skipped (the bot keeps answering from
        the others), or, with strict=True (`kbbot kb sync`), raises ManifestError naming the file."""
        on_error = None if strict else (lambda exc: log.warning("ignoring a knowledge base: %s", exc))
        return {m.name: m for m in discover_manifests(self.settings.knowledge_bases_dir, on_error)}

    def manifests(self) -> dict[str, KnowledgeBaseManifest]:
        """Every KB that exists in the store, with its manifest (declared, or created at run time)."""
        declared = self.declared()
        result: dict[str, KnowledgeBaseManifest] = {}
        for record in self.store.registry.list_kbs():
            manifest = declared.get(record.name) or KnowledgeBaseManifest(record.name, record.description)
            uploaders = tuple(dict.fromkeys(manifest.uploaders + self.settings.admin_user_ids))
            result[record.name] = KnowledgeBaseManifest(
                manifest.name, manifest.description, manifest.channels, manifest.visibility,
                manifest.allowed_channels, uploaders, manifest.docs_dir,
            )
        return result

    def create_kb(self, name: str, description: str) -> None:
        validate_kb_name(name)
        if not description.strip():
            raise KnowledgeBaseError("a knowledge base needs a description (the router reads it)")
        self.store.ensure_kb(name, description.strip(), *self.embedding_identity)

    def open_kb(self, name: str) -> None:
        """Make sure a KB exists (declared ones are created on first use) and is usable."""
        if self.store.registry.get_kb(name) is None:
            declared = self.declared().get(name)
            if declared is None:
                self.store.require_kb(name)  # raises with the list of known KBs
            else:
                self.create_kb(declared.name, declared.description)
        else:
            self.store.ensure_kb(name, "", *self.embedding_identity)

    def summaries(self) -> list[KbSummary]:
        declared = self.declared()
        summaries = []
        for record in self.store.registry.list_kbs():
            docs = self.store.registry.list_documents(record.name)
            summaries.append(
                KbSummary(
                    record.name, record.description, len(docs), sum(d.state == "ready" for d in docs),
                    sum(d.live_chunks for d in docs if d.live_version), record.embedding_model,
                )
            )
        known = {s.name for s in summaries}
        summaries += [KbSummary(m.name, m.description, 0, 0, 0, None) for m in declared.values() if m.name not in known]
        return sorted(summaries, key=lambda s: s.name)

    # --- documents ---------------------------------------------------------------------------

    def ingest(self, kb: str, paths: list[Path], progress: bool = False) -> IngestReport:
        self.open_kb(kb)
        return self.ingestor.ingest_paths(kb, paths, progress=progress)

    def ingest_bytes(self, kb: str, name: str, data: bytes, source_url: str | None = None) -> IngestReport:
        self.open_kb(kb)
        return self.ingestor.ingest_bytes(kb, name, data, source_url)

    def sync(self, progress: bool = False) -> list[IngestReport]:
        """Ingest every declared KB's docs/ folder; unchanged files cost nothing."""
        reports = []
        for manifest in self.declared(strict=True).values():
            self.open_kb(manifest.name)
            paths = [manifest.docs_dir] if manifest.docs_dir and manifest.docs_dir.is_dir() else []
            reports.append(self.ingestor.ingest_paths(manifest.name, paths, progress=progress))
        return reports

    def delete_document(self, kb: str, document: str) -> None:
        self.store.require_kb(kb)
        self.store.open()  # a store this process may not use (another holds it) refuses before anything changes
        version = self.store.registry.delete_document(kb, document)
        if version is None:
            names = ", ".join(d.name for d in self.store.registry.list_documents(kb)) or "none"
            raise KnowledgeBaseError(f"no document {document!r} in {kb!r} (documents: {names})")
        # The document is gone from every answer now; its chunks and the index follow (or, if Chroma
        # fails right now, at the next recovery and question).
        try:
            self.store.recover(kb)  # removes the retired chunks
            self.store.rebuild_keyword_index(kb)
        except Exception as exc:
            log.warning("deleted %s/%s; its chunks are removed later: %s", kb, document, exc)

    def reindex(self, kb: str, progress: bool = False) -> int:
        """Re-embed a KB's live chunks with the configured model into a new collection, then switch.

        The switch is a compare-and-set on the KB's generation: if anything was published meanwhile
        nothing is switched (run it again). An upload that wrote its chunks into the old collection
        meanwhile finds the collection switched at its own flip and writes them again (tools/ingest.py).
        """
        from llama_index.vector_stores.chroma import ChromaVectorStore

        store = self.store
        generation, live, _ = store.registry.live_snapshot(kb)
        record = store.require_kb(kb)
        if record.generation != generation:
            raise KnowledgeBaseError(f"knowledge base {kb!r} is changing right now; run `kbbot kb reindex {kb}` again")
        chunks = store._live_chunks(kb, live)
        vectors, unit_vectors = embed_chunks(self.embedder, chunks, show_progress=progress)
        # A name of its own: two reindexes of one KB at once (threads, processes on a Chroma server) never
        # write into, or clean up, each other's collection; the switch lets one of them win.
        new_name = f"kbbot_{kb}_g{generation + 1}_{uuid.uuid4().hex[:8]}"
        with store.chroma_errors():
            collection = store._collection(new_name, self.embedder.model_name, self.embedder.dimension)
            nodes = [chunk_to_node(c, v.tolist()) for c, v in zip(chunks, vectors, strict=True)]
            if nodes:
                ChromaVectorStore(chroma_collection=collection).add(nodes)
        # Only if nothing was published meanwhile: the new collection would lack it.
        if not store.registry.switch_collection(
            kb, new_name, self.embedder.model_name, self.embedder.dimension, expected_generation=generation
        ):
            with contextlib.suppress(Exception):
                store.client.delete_collection(new_name)
            raise KnowledgeBaseError(
                f"knowledge base {kb!r} changed while it was being re-indexed; nothing was switched, "
                f"run `kbbot kb reindex {kb}` again"
            )
        store.forget_collection(record.collection)
        try:
            store.client.delete_collection(record.collection)
        except Exception as exc:
            log.warning("old collection %s not removed: %s", record.collection, exc)
        store.registry.clear_unit_vectors(kb)
        if unit_vectors is not None:
            store.save_unit_vectors(kb, self.embedder.model_name, chunks, unit_vectors)
        try:
            store.rebuild_keyword_index(kb)
        except Exception as exc:  # switched already; the index is rebuilt at the next question
            log.warning("keyword index of %s not rebuilt after the reindex: %s", kb, exc)
        return len(nodes)
