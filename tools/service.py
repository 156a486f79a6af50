"""The knowledge service: one object that wires settings, store, embedder, ingestion and manifests.

Every surface (CLI, Slack, eval) goes through it, so they all see the same KBs the same way.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from tools.config import ToolSettings
from tools.embeddings import Embedder, embed_chunks, embedding_identity, get_embedder
from tools.ingest import ORIGIN_SYNC, DocumentResult, Ingestor, IngestReport
from tools.manifests import (
    KB_NAME_PATTERN,
    KnowledgeBaseManifest,
    ManifestError,
    discover_manifests,
    validate_kb_name,
)
from tools.registry import DocumentRecord
from tools.store import KnowledgeBaseError, KnowledgeStore, chunk_to_node

log = logging.getLogger(__name__)


class DocumentNotFound(KnowledgeBaseError):
    pass


NO_RULES = (
    "no access rules are recorded for it: declare it in knowledge_bases/<name>/kb.toml and run `kbbot kb sync`; "
    "until then only the command line can use it"
)


@dataclass(frozen=True)
class KbEntry:
    """One KB as the application layer sees it: its description and the access rules in force."""

    name: str
    description: str
    manifest: KnowledgeBaseManifest | None  # the last known rules; None: none known (command line only)
    problem: str | None  # why its declaration cannot be used now (the last known rules stay in force)
    exists: bool  # in the store; a declared KB is created at its first sync or upload
    model_problem: str | None = None  # indexed with another embedding model than the configured one


@dataclass(frozen=True)
class KbSummary:
    name: str
    description: str
    documents: int
    ready_documents: int
    chunks: int
    embedding_model: str | None
    visibility: str | None = None  # None: no access rules known (usable from the command line only)
    problem: str | None = None
    channels: tuple[str, ...] = ()  # the channels that search it first

    def to_json(self) -> dict:
        return self.__dict__.copy()


class KnowledgeService:
    def __init__(
        self,
        settings: ToolSettings,
        wrap_embedder: Callable[[Embedder], Embedder] | None = None,
        store: KnowledgeStore | None = None,
    ):
        self.settings = settings
        self._wrap_embedder = wrap_embedder  # e.g. the benchmarks' corpus-embedding cache
        if store is not None:  # e.g. an answering process's read-only view (bot/core/answer_processes.py)
            self.__dict__["store"] = store

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
        log.info("loading the embedding model (%s backend)", self.settings.embedding_backend)
        embedder = get_embedder(self.settings)
        return self._wrap_embedder(embedder) if self._wrap_embedder else embedder

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

    def declarations_signature(self) -> tuple:
        """Changes whenever a kb.toml appears, disappears or is rewritten (cheap: a directory listing)."""
        root = self.settings.knowledge_bases_dir
        if not root.is_dir():
            return ("missing",)
        signature = []
        for path in sorted(root.glob("*/kb.toml")):
            with contextlib.suppress(OSError):
                stat = path.stat()
                signature.append((str(path), stat.st_mtime_ns, stat.st_size))
        return tuple(signature)

    def refresh_manifests(self) -> list[str]:
        """Store every readable kb.toml as its KB's rules; for a broken or missing one keep the last known
        rules and record why. Returns the problems found (for `kbbot kb sync`, `kb list` and start-up logs)."""
        root = self.settings.knowledge_bases_dir
        broken: list[ManifestError] = []
        good = {m.name: m for m in discover_manifests(root, broken.append)}
        registry = self.store.registry
        stored = registry.manifests()
        for name, manifest in list(good.items()):
            known = stored.get(name)
            if known and known.manifest and known.manifest.restricted and not manifest.visibility_declared:
                # A file cut short, or its line deleted: a restricted KB turns public only when told so.
                del good[name]
                broken.append(
                    ManifestError(
                        f"{manifest.docs_dir.parent / 'kb.toml' if manifest.docs_dir else name}: no longer says "
                        '`visibility`; the KB was restricted and stays so (write visibility = "public" to open it)',
                        manifest.docs_dir.parent / "kb.toml" if manifest.docs_dir else None,
                    )
                )
        for name, manifest in good.items():
            path = str(manifest.docs_dir.parent / "kb.toml") if manifest.docs_dir else None
            known = stored.get(name)
            if (
                known is None
                or known.manifest != manifest
                or known.problem
                or (known.source, known.path) != ("declared", path)
            ):
                registry.save_manifest(manifest, "declared", path)
            record = registry.get_kb(name)
            if record is not None and record.description != manifest.description:
                registry.upsert_kb(
                    name, manifest.description, record.embedding_model, record.dimension, record.collection
                )
        problems: list[str] = []
        noted: set[str] = set()
        by_path = {r.path: name for name, r in stored.items() if r.path}
        for exc in broken:
            path = str(exc.path) if exc.path else None
            name = by_path.get(path) or (exc.path.parent.name if exc.path else None)
            problems.append(str(exc))
            if name and name not in good and KB_NAME_PATTERN.match(name):
                registry.note_manifest_problem(name, str(exc), path)
                noted.add(name)
        for name, record in stored.items():
            if record.source != "declared" or name in good or name in noted:
                continue
            where = (
                f"{record.path} is missing"
                if root.is_dir()
                else f"the knowledge bases folder {root} is missing (KBBOT_KNOWLEDGE_BASES_DIR)"
            )
            if record.problem != where:
                registry.note_manifest_problem(name, where, record.path)
            problems.append(f"{name}: {where}")
        return problems

    def catalog(self) -> dict[str, KbEntry]:
        """Every KB, with the rules in force for it: in the store, or declared and not created yet."""
        registry = self.store.registry
        records = {r.name: r for r in registry.list_kbs()}
        stored = registry.manifests()
        identity = embedding_identity(self.settings)
        entries: dict[str, KbEntry] = {}
        for name in sorted(records.keys() | stored.keys()):
            record, known = records.get(name), stored.get(name)
            if record is None and (
                known is None or known.source != "declared" or known.manifest is None or known.problem
            ):
                continue  # a declaration that is gone, of a KB that was never created: nothing to use
            manifest = known.manifest if known else None
            problem = known.problem if known else None
            if manifest is None and problem is None:
                problem = NO_RULES
            model_problem = None
            if record is not None and identity is not None and (record.embedding_model, record.dimension) != identity:
                model_problem = (
                    f"indexed with {record.embedding_model} ({record.dimension}-d), but kbbot is configured for "
                    f"{identity[0]} ({identity[1]}-d): run `kbbot kb reindex {name}`"
                )
            description = manifest.description if manifest else (record.description if record else "")
            entries[name] = KbEntry(name, description, manifest, problem, record is not None, model_problem)
        return entries

    def create_kb(self, name: str, description: str, manifest: KnowledgeBaseManifest | None = None) -> None:
        """A KB made at run time (`kbbot kb create`): its rules are stored with it (public unless `manifest`
        says otherwise). A declared KB keeps its declaration's rules."""
        validate_kb_name(name)
        if not description.strip():
            raise KnowledgeBaseError("a knowledge base needs a description (the router reads it)")
        self.store.ensure_kb(name, description.strip(), *self.embedding_identity)
        known = self.store.registry.manifests().get(name)
        if known is None or known.source != "declared":
            rules = manifest or KnowledgeBaseManifest(name, description.strip())
            self.store.registry.save_manifest(
                replace(rules, name=name, description=description.strip()), "created", None
            )

    def open_kb(self, name: str) -> None:
        """Make sure a KB exists (declared ones are created on first use) and is usable."""
        if self.store.registry.get_kb(name) is None:
            known = self.store.registry.manifests().get(name)
            if known is None or known.source != "declared" or known.manifest is None:
                self.store.require_kb(name)  # raises with the list of known KBs
            else:
                self.create_kb(name, known.manifest.description)
        else:
            self.store.ensure_kb(name, "", *self.embedding_identity)

    def summaries(self) -> list[KbSummary]:
        summaries = []
        for entry in self.catalog().values():
            docs = self.store.registry.list_documents(entry.name) if entry.exists else []
            record = self.store.registry.get_kb(entry.name) if entry.exists else None
            summaries.append(
                KbSummary(
                    entry.name,
                    entry.description,
                    len(docs),
                    sum(d.state == "ready" for d in docs),
                    sum(d.live_chunks for d in docs if d.live_version),
                    record.embedding_model if record else None,
                    entry.manifest.visibility if entry.manifest else None,
                    entry.problem or entry.model_problem,
                    entry.manifest.channels if entry.manifest else (),
                )
            )
        return summaries

    def delete_kb(self, name: str) -> None:
        self.store.delete_kb(name)

    # --- documents ---------------------------------------------------------------------------

    def documents(self, kb: str, names: Iterable[str] | None = None) -> list[DocumentRecord]:
        return self.store.registry.list_documents(kb, names)

    def ingest(self, kb: str, paths: list[Path], progress: bool = False) -> IngestReport:
        self.open_kb(kb)
        return self.ingestor.ingest_paths(kb, paths, progress=progress)

    def ingest_bytes(
        self, kb: str, name: str, data: bytes, source_url: str | None = None, uploaded_by: str | None = None
    ) -> IngestReport:
        self.open_kb(kb)
        return self.ingestor.ingest_bytes(kb, name, data, source_url, uploaded_by)

    def ingest_uploads(
        self, kb: str, uploads: list[tuple[str, bytes, str | None]], uploaded_by: str | None = None
    ) -> IngestReport:
        """Several uploads as one batch (name, data, source_url): a name used twice is refused for both;
        `uploaded_by` (a Slack user id) is stored with each document that goes live."""
        self.open_kb(kb)
        return self.ingestor.ingest_uploads(kb, uploads, uploaded_by)

    def sync(self, progress: bool = False, keep_missing: bool = False) -> list[IngestReport]:
        """Ingest every declared KB's docs/ folder; unchanged files cost nothing.

        A document an earlier sync ingested from docs/ whose file has left the folder is removed (status
        "removed"), or with `keep_missing` kept and reported ("missing"). Documents that came from anywhere
        else (Slack uploads, `kbbot ingest`) are never touched.
        """
        reports = []
        self.refresh_manifests()
        for manifest in self.declared(strict=True).values():
            self.open_kb(manifest.name)
            docs_dir = manifest.docs_dir if manifest.docs_dir and manifest.docs_dir.is_dir() else None
            report = self.ingestor.ingest_paths(
                manifest.name, [docs_dir] if docs_dir else [], progress=progress, origin=ORIGIN_SYNC
            )
            if docs_dir is not None:  # no folder at all is a misconfiguration, not "every file left"
                self._sync_missing(manifest.name, report, keep_missing)
            reports.append(report)
        return reports

    def _sync_missing(self, kb: str, report: IngestReport, keep_missing: bool) -> None:
        registry = self.store.registry
        origins = registry.origins(kb)
        # Documents synced before origins were recorded: one unchanged from a file in docs/, not uploaded
        # from Slack (no link), is that file's, so sync owns it from now on.
        unchanged = {d.document for d in report.documents if d.status == "unchanged"}
        adopt = [
            d.name
            for d in registry.list_documents(kb)
            if d.name in unchanged and origins.get(d.name) is None and d.source_url is None
        ]
        if adopt:
            registry.set_origin(kb, adopt, ORIGIN_SYNC)
        present = {d.document for d in report.documents}  # every file still there, ingested or not
        missing = sorted(name for name, origin in origins.items() if origin == ORIGIN_SYNC and name not in present)
        if not missing:
            return
        if keep_missing:
            for name in missing:
                report.documents.append(
                    DocumentResult(name, "missing", reason="its file is no longer in docs/; kept (--keep-missing)")
                )
            return
        for name in missing:
            registry.delete_document(kb, name)
            report.documents.append(DocumentResult(name, "removed", reason="its file is no longer in docs/"))
        self.store.recover(kb)  # removes the retired chunks
        self.store.rebuild_keyword_index(kb)

    def delete_document(self, kb: str, document: str) -> None:
        self.store.require_kb(kb)
        self.store.open()  # a store this process may not use (another holds it) refuses before anything changes
        version = self.store.registry.delete_document(kb, document)
        if version is None:
            names = ", ".join(d.name for d in self.store.registry.list_documents(kb)) or "none"
            raise DocumentNotFound(f"no document {document!r} in {kb!r} (documents: {names})")
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
