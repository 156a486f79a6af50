"""parse → chunk → embed → store, versioned and atomic.

Per document: the content hash decides whether anything happens (an unchanged file costs no
embedding). A new version's chunks are written under a new version number while the old version
stays live; the registry then flips the document to the new version in one transaction and the old
chunks are removed. Bad input fails before the registry is touched, so it changes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tools.chunking import ChunkDraft, ChunkWindow, chunk_document
from tools.config import ToolSettings
from tools.embeddings import MINILM_MAX_TOKENS, Embedder, EmbeddingError, answer_unit_spans, embed_chunks
from tools.parse_worker import parse_isolated
from tools.parsing import (
    SUPPORTED_SUFFIXES,
    ParsedDocument,
    ParseLimits,
    Section,
    UnreadableDocument,
    unsupported_type,
)
from tools.prefetch import Prefetched
from tools.registry import CollectionChanged, PendingVersion, Published, RegistryConflict
from tools.store import (
    CollectionMissing,
    KnowledgeBaseError,
    KnowledgeStore,
    StoredChunk,
    chunk_id_for,
    chunk_to_node,
    version_key,
)

log = logging.getLogger(__name__)

# Documents are published in groups, so a long ingest makes progress durable as it goes.
PUBLISH_GROUP_CHUNKS = 512
# Times a group's chunks are written again when a reindex switched the KB's collection under them.
WRITE_ATTEMPTS = 3
# Chunks parsed and chunked ahead of the model (on their own thread): a whole next group, so the
# model never waits for parsing once the first group is ready, and memory stays bounded.
PREPARE_AHEAD_CHUNKS = 2 * PUBLISH_GROUP_CHUNKS
# The progress bar appears once an ingest has this many chunks to embed.
PROGRESS_MIN_CHUNKS = 64


class _Refused(Exception):
    """The group cannot be published; the message says why (for people)."""


# Where a document came from, recorded with it (registry `documents.origin`): `kbbot kb sync` removes only
# documents it ingested itself from a KB's docs/ folder once their file is gone.
ORIGIN_SYNC = "sync"
ORIGIN_PATHS = "paths"  # `kbbot ingest` (files and folders named on the command line)
ORIGIN_UPLOAD = "upload"  # bytes handed over by a surface (Slack uploads)


@dataclass
class DocumentResult:
    document: str
    # "ready" | "unchanged" | "failed"; "skipped" (a file in a folder that is not a document: `reason`);
    # from `kbbot kb sync`, "removed" (its file left docs/) or "missing" (the same, kept: --keep-missing)
    status: str
    chunks: int = 0
    error: str | None = None
    reason: str | None = None


@dataclass
class IngestReport:
    kb: str
    documents: list[DocumentResult] = field(default_factory=list)
    embedded_chunks: int = 0

    @property
    def ok(self) -> bool:
        return all(d.status != "failed" for d in self.documents)

    def to_json(self) -> dict:
        documents = [{k: v for k, v in asdict(d).items() if k != "reason" or v is not None} for d in self.documents]
        return {"kb": self.kb, "documents": documents, "embedded_chunks": self.embedded_chunks}


@dataclass
class SourceDocument:
    """One thing to ingest: a name in the KB and a way to get its parsed content."""

    name: str
    content_hash: str
    load: Callable[[], ParsedDocument]
    source_url: str | None = None
    label: str | None = None  # where it came from, for people (a path, a Slack link); defaults to the name
    uploaded_by: str | None = None  # who handed it over (a Slack user id), stored with the version it becomes
    # Whether the source still holds what was read (a file may change while the documents before it are
    # embedded: it is read ahead of the model); None = it cannot change.
    unchanged_since_read: Callable[[], bool] | None = None


@dataclass
class _Prepared:
    source: SourceDocument
    title: str
    drafts: list[ChunkDraft]
    unit_spans: list[list[tuple[int, int]]] | None = None  # per draft, when the embedder pools them


FILE_CHANGED = "the file changed while it was being ingested; ingest it again"

# Bump when parsing or chunking changes what a file becomes, or what is stored per chunk (v5: answer-unit
# vectors; v6: answer units follow sentences across hard line breaks, so their saved vectors must be
# pooled over the new spans; v7: a short sentence or a paragraph's heading is no longer glued to a run of table
# cells, and a command synopsis is no table — session 6 changed that without bumping; v8: a PDF's running header and
# page numbers are no longer glued to each page's text): every document then re-ingests once.
PIPELINE_VERSION = b"kbbot-pipeline-9"


def _pipeline_prefix(window: ChunkWindow) -> bytes:
    # The chunk window is hashed with the content: a document ingested under another window is never
    # "unchanged", so no KB keeps chunks of two windows once its documents are ingested again.
    return PIPELINE_VERSION + b"\0" + window.identity.encode() + b"\0"


def content_hash(data: bytes, window: ChunkWindow) -> str:
    return hashlib.sha256(_pipeline_prefix(window) + data).hexdigest()


def file_content_hash(path: Path, window: ChunkWindow) -> str:
    """content_hash() of a file, read in blocks (a folder of big files is never all in memory)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.sha256(_pipeline_prefix(window))).hexdigest()


def chunk_window_for(settings: ToolSettings) -> ChunkWindow:
    """The chunk window ingest cuts documents to: the configured size, fitted to the local model's window
    (an API model's window is far beyond any chunk)."""
    window = MINILM_MAX_TOKENS if settings.embedding_backend == "local" else None
    return ChunkWindow(settings.chunk_tokens, settings.chunk_overlap_tokens, window)


class Ingestor:
    def __init__(
        self,
        settings: ToolSettings,
        store: KnowledgeStore,
        embedder: Callable[[], Embedder],
        embedding_identity: tuple[str, int],
        parse_limits: ParseLimits | None = None,
    ):
        self.settings = settings
        self.store = store
        self._embedder = embedder
        self.embedding_identity = embedding_identity
        # What parsing one file may cost (time, memory, pages, inflation, depth, characters).
        self.parse_limits = parse_limits or settings.parse_limits
        self.chunk_window = chunk_window_for(settings)

    @property
    def embedder(self) -> Embedder:
        return self._embedder()

    # --- entry points ------------------------------------------------------------------------

    def ingest_paths(
        self,
        kb: str,
        paths: Sequence[Path],
        progress: bool = False,
        on_result: Callable[[DocumentResult], None] | None = None,
        origin: str = ORIGIN_PATHS,
    ) -> IngestReport:
        """Files and folders (recursively) into a KB. Bad files are reported; the rest still ingest.

        Names: a single file keeps its basename and a single folder's files are named relative to it;
        several paths are named relative to their common parent (`faq/index.html`, `tutorial/index.html`).
        Inside a folder, files that are not documents (.css, .sh, no extension...) are skipped and listed.
        """
        report = IngestReport(kb)
        sources: list[SourceDocument] = []
        for name, path in self._expand(paths, report):
            try:
                sources.append(self.source_from_file(path, name))
            except UnreadableDocument as exc:
                report.documents.append(DocumentResult(name, "failed", error=f"{name}: {exc}"))
        report = self.ingest_sources(kb, sources, progress=progress, report=report, on_result=on_result)
        self._record_origin(kb, report, origin)
        return report

    def ingest_bytes(
        self, kb: str, name: str, data: bytes, source_url: str | None = None, uploaded_by: str | None = None
    ) -> IngestReport:
        """Uploaded content (e.g. a Slack file): same checks and pipeline as files on disk."""
        return self.ingest_uploads(kb, [(name, data, source_url)], uploaded_by=uploaded_by)

    def ingest_uploads(
        self, kb: str, uploads: Sequence[tuple[str, bytes, str | None]], uploaded_by: str | None = None
    ) -> IngestReport:
        """Several uploads, (name, data, source_url) each, as one batch: two with the same name are both
        refused (naming both), rather than the second silently replacing the first. `uploaded_by` (who
        uploaded them) is stored with each document that goes live."""
        report = IngestReport(kb)
        sources: list[SourceDocument] = []
        limits = self.parse_limits
        for number, (name, data, source_url) in enumerate(uploads, start=1):
            label = source_url or (f"upload {number} of {len(uploads)}" if len(uploads) > 1 else name)
            try:
                self._check_size(name, len(data))
                suffix = Path(name).suffix.lower()
                if suffix not in SUPPORTED_SUFFIXES:
                    raise UnreadableDocument(unsupported_type(suffix))
                digest = content_hash(data, self.chunk_window)
                sources.append(
                    SourceDocument(
                        name,
                        digest,
                        lambda n=name, d=data: parse_isolated(Path(n), d, limits),
                        source_url,
                        label,
                        uploaded_by,
                    )
                )
            except UnreadableDocument as exc:
                report.documents.append(DocumentResult(name, "failed", error=f"{name}: {exc}"))
        if not sources:
            return report
        report = self.ingest_sources(kb, sources, report=report)
        self._record_origin(kb, report, ORIGIN_UPLOAD)
        return report

    def _record_origin(self, kb: str, report: IngestReport, origin: str) -> None:
        """Record where the documents this ingest published came from (see ORIGIN_SYNC)."""
        ready = [d.document for d in report.documents if d.status == "ready"]
        if ready:
            self.store.registry.set_origin(kb, ready, origin)

    def ingest_texts(self, kb: str, records: Iterable[tuple[str, str, str]], progress: bool = False) -> IngestReport:
        """(name, title, text) records, e.g. a benchmark corpus, through the same pipeline."""
        sources = []
        for name, title, text in records:
            digest = content_hash(f"{title}\n{text}".encode(), self.chunk_window)
            sources.append(SourceDocument(name, digest, lambda t=title, x=text: ParsedDocument(t, [Section(x, t)])))
        return self.ingest_sources(kb, sources, progress=progress)

    # --- pipeline ----------------------------------------------------------------------------

    def source_from_file(self, path: Path, name: str) -> SourceDocument:
        if path.is_symlink() and not path.exists():
            raise UnreadableDocument("a broken or looping symbolic link")
        if not path.exists():
            raise UnreadableDocument("no such file")
        if not path.is_file():
            raise UnreadableDocument("not a regular file")
        if path.suffix.lower() not in SUPPORTED_SUFFIXES:
            raise UnreadableDocument(unsupported_type(path.suffix.lower()))
        try:
            self._check_size(name, path.stat().st_size)
            digest = file_content_hash(path, self.chunk_window)
        except OSError as exc:
            raise UnreadableDocument(f"cannot read the file ({exc.strerror or type(exc).__name__})") from exc
        limits = self.parse_limits

        def load() -> ParsedDocument:
            try:
                with path.open("rb") as handle:  # never more than the limit, even if it grew meanwhile
                    data = handle.read(self.settings.max_upload_bytes + 1)
            except OSError as exc:
                raise UnreadableDocument(f"cannot read the file ({exc.strerror or type(exc).__name__})") from exc
            self._check_size(name, len(data))
            if content_hash(data, self.chunk_window) != digest:
                raise UnreadableDocument(FILE_CHANGED)
            return parse_isolated(path, data, limits)

        def unchanged_since_read() -> bool:
            try:
                return file_content_hash(path, self.chunk_window) == digest
            except OSError:
                return False

        return SourceDocument(name, digest, load, label=str(path), unchanged_since_read=unchanged_since_read)

    def _check_size(self, name: str, size: int) -> None:
        limit = self.settings.max_upload_bytes
        if size > limit:
            raise UnreadableDocument(
                f"the file is {_mib(size)}, over the {_mib(limit)} upload limit (KBBOT_MAX_UPLOAD_MB)"
            )

    def _expand(self, paths: Sequence[Path], report: IngestReport) -> list[tuple[str, Path]]:
        """(name in the KB, file) for every document under `paths`; what is not a document is reported."""
        given = [Path(os.path.abspath(p)) for p in paths]  # normalised; symbolic links left as they are
        base = _naming_base(given)
        expanded: list[tuple[str, Path]] = []
        seen: set[Path] = set()

        def add(file: Path) -> None:
            if file not in seen:
                seen.add(file)
                expanded.append((file.relative_to(base).as_posix(), file))

        for path in given:
            if path.is_dir():
                for file in sorted(path.rglob("*")):
                    relative = file.relative_to(path)
                    # Hidden files and folders (.git/, .DS_Store, editor swap files) are not documents.
                    if any(part.startswith(".") for part in relative.parts):
                        continue
                    reason = _not_a_document(file)
                    if reason is None:
                        add(file)
                    elif reason:
                        name = file.relative_to(base).as_posix()
                        report.documents.append(DocumentResult(name, "skipped", reason=reason))
            elif path.is_symlink() and not path.exists():
                report.documents.append(
                    DocumentResult(path.name, "failed", error=f"{path}: a broken or looping symbolic link")
                )
            elif path.exists():
                add(path)  # named explicitly: an unsupported type is an error (source_from_file says so)
            else:
                report.documents.append(DocumentResult(path.name, "failed", error=f"{path}: no such file or folder"))
        return expanded

    def ingest_sources(
        self,
        kb: str,
        sources: Sequence[SourceDocument],
        progress: bool = False,
        report: IngestReport | None = None,
        on_result: Callable[[DocumentResult], None] | None = None,
    ) -> IngestReport:
        report = report or IngestReport(kb)
        self.store.check_model(kb, *self.embedding_identity)
        # Only the rows of the documents at hand: a KB of a million chunks has half a million documents.
        named = self.store.registry.list_documents(kb, names=[s.name for s in sources])
        live_hashes = {d.name: d.live_hash for d in named if d.live_version}

        # One name, one document: several sources with the same name in one batch (two uploads both
        # called report.pdf) are all refused, naming each, rather than one silently replacing another.
        by_name: dict[str, list[SourceDocument]] = defaultdict(list)
        for source in sources:
            by_name[source.name].append(source)

        def record(result: DocumentResult) -> None:
            report.documents.append(result)
            if result.status == "ready":
                report.embedded_chunks += result.chunks
            if on_result:
                on_result(result)

        to_prepare: list[SourceDocument] = []
        for source in sources:
            clashing = by_name[source.name]
            if len(clashing) > 1:
                if source is not clashing[0]:
                    continue  # one result per name
                labels = "; ".join(s.label or s.name for s in clashing)
                record(
                    DocumentResult(
                        source.name,
                        "failed",
                        error=f"{source.name}: {len(clashing)} files in this batch have this name ({labels}); "
                        "none of them was ingested — rename one, or ingest them separately",
                    )
                )
            elif live_hashes.get(source.name) == source.content_hash:
                record(DocumentResult(source.name, "unchanged"))
            else:
                to_prepare.append(source)

        # Parsing and chunking run on a thread of their own, ahead of the model: while one group is
        # embedded, written and published, the next documents are being prepared.
        bar = _ChunkProgress(progress)
        group: list[_Prepared] = []
        group_chunks = 0
        try:
            with Prefetched(
                (self._prepare(source) for source in to_prepare),
                max_ahead=PREPARE_AHEAD_CHUNKS,
                weight=lambda item: len(item.drafts) if isinstance(item, _Prepared) else 1,
                name=f"ingest-prepare-{kb}",
            ) as prepared:
                for item in prepared:
                    if isinstance(item, DocumentResult):
                        record(item)
                        continue
                    group.append(item)
                    group_chunks += len(item.drafts)
                    bar.expect(len(item.drafts))
                    if group_chunks >= PUBLISH_GROUP_CHUNKS:
                        for result in self._write_group(kb, group, bar):
                            record(result)
                        group, group_chunks = [], 0
                if group:
                    for result in self._write_group(kb, group, bar):
                        record(result)
        finally:
            bar.close()
        if report.embedded_chunks or any(r.status == "ready" for r in report.documents):
            try:
                self.store.rebuild_keyword_index(kb)
            except Exception as exc:  # the documents are live; the index is rebuilt at the next question
                log.warning("keyword index of %s not rebuilt after the ingest: %s", kb, exc)
        return report

    def _prepare(self, source: SourceDocument) -> _Prepared | DocumentResult:
        """Parse and chunk one document (on the preparing thread): what the model will embed, or why not."""
        try:
            parsed = source.load()
            embedder = self.embedder
            drafts = chunk_document(parsed, embedder.tokenize, self.chunk_window)
            if not drafts:
                raise UnreadableDocument("no text could be extracted")
            pools = hasattr(embedder, "embed_documents_with_units")
            spans = [answer_unit_spans(d.text) for d in drafts] if pools else None
        except UnreadableDocument as exc:
            return DocumentResult(source.name, "failed", error=f"{source.name}: {exc}")
        except EmbeddingError:
            raise  # not this document's fault: the whole ingest cannot run
        except Exception as exc:  # one bad document never sinks the batch (or the process)
            log.exception("could not prepare %s", source.name)
            return DocumentResult(
                source.name, "failed", error=f"{source.name}: could not be read ({type(exc).__name__})"
            )
        return _Prepared(source, parsed.title, drafts, spans)

    def _write_group(self, kb: str, group: list[_Prepared], bar) -> list[DocumentResult]:
        """Begin, embed, write and flip one group. Whatever fails, every document of the group ends
        `ready` with its chunks in the KB's current collection, or `failed` with a reason: never
        `processing` once this returns, never ready without chunks, and its lease is released."""
        changed = [p for p in group if p.source.unchanged_since_read and not p.source.unchanged_since_read()]
        refused = [DocumentResult(p.source.name, "failed", error=f"{p.source.name}: {FILE_CHANGED}") for p in changed]
        group = [p for p in group if p not in changed]
        if not group:
            return refused
        try:
            pendings = self.store.registry.begin_versions(kb, [(p.source.name, p.source.content_hash) for p in group])
        except RegistryConflict as exc:  # the KB was deleted meanwhile: nothing was begun
            return refused + [DocumentResult(p.source.name, "failed", error=f"{p.source.name}: {exc}") for p in group]
        written: list[str] = []  # collections this group's chunks went into
        try:
            return refused + self._write_and_publish(kb, group, pendings, bar, written)
        except BaseException as exc:
            reason = _reason(exc)
            if isinstance(exc, Exception):
                log.exception("ingest failed for %s", [p.source.name for p in group])
            # The registry first: once a version is `failed` it is never retrievable, and its chunks are
            # deleted now or, if the store is unreachable, by the next recovery.
            self._abandon(pendings, reason)
            for collection in dict.fromkeys(written):
                self._drop_versions(kb, collection, [(p.document, p.version) for p in pendings])
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt and the like: cleaned up, then on their way
            failed = [DocumentResult(p.source.name, "failed", error=f"{p.source.name}: {reason}") for p in group]
            return refused + failed

    def _write_and_publish(
        self, kb: str, group: list[_Prepared], pendings: list[PendingVersion], bar, written: list[str]
    ) -> list[DocumentResult]:
        chunks, vectors, unit_vectors = self._embed_chunks(kb, group, pendings, bar)
        nodes = [chunk_to_node(c, v.tolist()) for c, v in zip(chunks, vectors, strict=True)]
        items = [
            (
                pending,
                prepared.source.content_hash,
                len(prepared.drafts),
                prepared.source.source_url,
                prepared.source.uploaded_by,
            )
            for prepared, pending in zip(group, pendings, strict=True)
        ]
        if unit_vectors is not None:
            self.store.save_unit_vectors(kb, self.embedding_identity[0], chunks, unit_vectors)
        # The flip is a compare-and-set against the collection the chunks went into: a reindex that
        # switched collections meanwhile makes it fail, and the chunks are written again to the new one.
        for _attempt in range(WRITE_ATTEMPTS):
            record = self.store.require_kb(kb)
            mismatch = self.store.model_mismatch(kb, *self.embedding_identity)
            if mismatch:
                raise _Refused(f"the knowledge base changed while this was being ingested: {mismatch}")
            collection = record.collection
            written.append(collection)
            try:
                with self.store.chroma_errors():
                    self.store.vector_store(kb, collection, create=False).add(nodes)
            except Exception:
                if self.store.require_kb(kb).collection != collection:  # switched under us: write again
                    self.store.forget_collection(collection)
                    continue
                raise
            try:
                outcomes = self.store.registry.publish_versions(items, collection=collection)
            except CollectionChanged:
                self._drop_versions(kb, collection, [(p.document, p.version) for p in pendings], forget=False)
                continue
            except Exception:
                if self.store.registry.version_states(pendings) != ["ready"] * len(pendings):
                    raise
                # The flip committed although the call raised: live; what it replaced is cleaned by recovery.
                self.store.registry.lease.release(len(pendings))
                outcomes = [Published(p) for p in pendings]
            break
        else:
            raise _Refused(
                "the knowledge base was re-indexed again and again while this was being ingested; ingest it again"
            )

        # Published: from here on nothing may raise (the caller would abandon live versions).
        results, replaced, refused = [], [], []
        for prepared, outcome in zip(group, outcomes, strict=True):
            name = prepared.source.name
            if outcome.live:
                results.append(DocumentResult(name, "ready", chunks=len(prepared.drafts)))
                if outcome.replaced:
                    replaced.append((outcome.pending.document, outcome.replaced))
            else:
                results.append(DocumentResult(name, "failed", error=f"{name}: {outcome.conflict}"))
                refused.append((outcome.pending.document, outcome.pending.version))
        try:
            self._drop_versions(kb, collection, replaced)
            for stale in dict.fromkeys(written):
                self._drop_versions(kb, stale, refused)
        except Exception as exc:  # invisible leftovers: the next recovery deletes them
            log.warning("cleanup after publishing to %s: %s", kb, exc)
        return results

    def _abandon(self, pendings: list[PendingVersion], reason: str) -> None:
        """Mark the versions failed; if even that fails, give up their lease so recovery takes them."""
        for attempt in range(3):
            try:
                self.store.registry.abandon_versions(pendings, reason)
                return
            except Exception as exc:
                log.warning("could not mark %d versions failed (attempt %d): %s", len(pendings), attempt + 1, exc)
                time.sleep(0.2 * (attempt + 1))
        self.store.registry.lease.release(len(pendings))

    def _drop_versions(self, kb: str, collection: str, versions: list[tuple[str, int]], forget: bool = True) -> None:
        """Delete the chunks of versions the registry no longer serves (retired or failed); best effort.

        `forget=False` keeps the registry rows (the version is still in flight, written elsewhere)."""
        if not versions:
            return
        try:
            vector_store = self.store.vector_store(kb, collection, create=False)
        except CollectionMissing:  # a reindex or a KB deletion dropped the collection, and the chunks with it
            vector_store = None
        except Exception as exc:  # unreachable right now: left for the next recovery (invisible meanwhile)
            log.warning("could not delete chunks of %d versions yet: %s", len(versions), exc)
            return
        for document, version in versions:
            if vector_store is not None:
                try:
                    with self.store.chroma_errors():
                        vector_store.delete(version_key(kb, document, version))
                except Exception as exc:  # left for the next recovery: they are invisible meanwhile
                    log.warning("could not delete chunks of %s v%s yet: %s", document, version, exc)
                    continue
            if forget:
                self.store.registry.forget_versions(kb, [(document, version)])

    def _embed_chunks(self, kb: str, group: list[_Prepared], pendings: list[PendingVersion], bar):
        """The group's chunks, their vectors and, where the embedder can pool them from the same
        pass, their answer units' vectors (else None)."""
        chunks = [
            StoredChunk(
                chunk_id=chunk_id_for(kb, pending.document, pending.version, draft.index),
                kb=kb,
                document=pending.document,
                version=pending.version,
                index=draft.index,
                title=prepared.title,
                location=draft.location,
                text=draft.text,
                source_url=prepared.source.source_url,
            )
            for prepared, pending in zip(group, pendings, strict=True)
            for draft in prepared.drafts
        ]
        unit_spans = None  # worked out while chunking (for an embedder that pools them)
        if all(prepared.unit_spans is not None for prepared in group):
            unit_spans = [spans for prepared in group for spans in prepared.unit_spans or ()]
        vectors, unit_vectors = embed_chunks(self.embedder, chunks, unit_spans=unit_spans)
        if bar is not None:
            bar.update(len(chunks))
        return chunks, vectors, unit_vectors


class _ChunkProgress:
    """The "embedding" bar, in chunks: its total grows as documents are prepared (they are chunked while
    earlier ones embed), and it shows once an ingest has PROGRESS_MIN_CHUNKS chunks to embed."""

    def __init__(self, enabled: bool):
        self._enabled = enabled
        self._total = 0
        self._bar = None

    def expect(self, chunks: int) -> None:
        self._total += chunks
        if self._bar is not None:
            self._bar.total = self._total
            self._bar.refresh()
        elif self._enabled and self._total >= PROGRESS_MIN_CHUNKS:
            from tqdm import tqdm

            self._bar = tqdm(total=self._total, unit="chunk", desc="embedding", leave=False)

    def update(self, chunks: int) -> None:
        if self._bar is not None:
            self._bar.update(chunks)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _naming_base(given: list[Path]) -> Path:
    """The folder document names are relative to: a single folder itself, a single file's folder, or
    the common parent of several paths."""
    if len(given) == 1:
        return given[0] if given[0].is_dir() else given[0].parent
    if not given:
        return Path.cwd()
    base = Path(os.path.commonpath([str(p) for p in given]))
    return base if base.is_dir() else base.parent


def _not_a_document(file: Path) -> str | None:
    """Why an entry found in a folder is not ingested ("" for folders: nothing to say), or None."""
    if file.is_symlink() and not file.exists():
        return "a broken or looping symbolic link"
    if file.is_dir():
        return "a link to a folder (not followed)" if file.is_symlink() else ""
    if not file.is_file():
        return "not a regular file"
    if file.suffix.lower() not in SUPPORTED_SUFFIXES:
        return unsupported_type(file.suffix.lower())
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, _Refused | RegistryConflict):
        return str(exc)
    if isinstance(exc, KnowledgeBaseError):
        return " ".join(str(exc).split())[:300]
    # A library's own message can name hosts, paths or internals: it goes to the log, not to the person.
    return f"could not embed or store it ({type(exc).__name__}; the log has the details)"


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.3g} MB"
