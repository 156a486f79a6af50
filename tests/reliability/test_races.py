"""Races inside one process: threads against one real store (embedded Chroma, SQLite registry, bm25s).

Each test drives a real interleaving — threads, plus a pause at a named point where the order matters —
and then checks the store's invariants (helpers/invariants.py): every document `ready` is retrievable
from Chroma and the keyword index, every `failed` one says why, nothing is left `processing`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

import pytest
from helpers import figures
from helpers.invariants import assert_consistent, lost

from bot.config import Settings
from tools.ingest import SourceDocument, content_hash
from tools.keyword_index import KeywordIndex
from tools.parsing import ParsedDocument, Section
from tools.service import KnowledgeService

KB = "races"


def _doc(i: int, topic: str = "shift") -> bytes:
    return (
        f"# Handbook {i}\n\n## Rule {i}\n\nThe {topic} rota {i} is kept by team T{i:03d}; "
        f"call desk {1000 + i} for the {topic} swap form number {i * 7}.\n"
    ).encode()


def _pause(obj: object, name: str, reached: threading.Event, resume: threading.Event, times: int = 1) -> None:
    """Wrap obj.name (an instance attribute): the first `times` calls signal `reached` and wait for `resume`,
    then run the real method. Only the timing changes, never what the method does."""
    real = getattr(obj, name)
    calls = [0]

    def paused(*args, **kwargs):
        calls[0] += 1
        if calls[0] <= times:
            reached.set()
            assert resume.wait(60), f"{name} was never resumed"
        return real(*args, **kwargs)

    setattr(obj, name, paused)


class Worker(threading.Thread):
    """A thread whose result or exception is kept for the test to inspect."""

    def __init__(self, target: Callable[[], object]):
        super().__init__(daemon=True)
        self._target_fn = target
        self.result: object = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._target_fn()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def outcome(self, timeout: float = 120) -> object:
        self.join(timeout)
        assert not self.is_alive(), "the worker thread hung"
        if self.error is not None:
            raise AssertionError(f"the worker raised {type(self.error).__name__}: {self.error}") from self.error
        return self.result


@pytest.fixture
def kb_service(settings: Settings):
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "Race test knowledge base")
        yield svc


def _pending_versions(settings: Settings) -> list[tuple]:
    db = sqlite3.connect(settings.data_dir / "registry.sqlite3")
    try:
        return db.execute("SELECT kb, document, version FROM versions WHERE state = 'processing'").fetchall()
    finally:
        db.close()


def _leases(settings: Settings) -> list[str]:
    leases = settings.data_dir / "leases"
    return sorted(p.name for p in leases.iterdir()) if leases.exists() else []


# --- keyword index: one generation rebuilt by several threads at once ------------------------------------


def test_keyword_rebuilds_of_one_generation_never_collide_or_tear(kb_service: KnowledgeService) -> None:
    """An ingest rebuilds the index after its flip while a question finds the generation new and rebuilds
    it too: both must succeed, and a reader loading the saved index never sees half of it."""
    store = kb_service.store
    for i in range(12):
        assert kb_service.ingest_bytes(KB, f"doc{i}.md", _doc(i)).ok
    generation = store.registry.generation(KB)
    directory = store._keyword_dir(KB) / f"g{generation}"
    want = len(store.live_chunks(KB))
    stop = threading.Event()
    torn: list[str] = []

    def rebuild() -> None:
        for _ in range(15):
            assert len(store.rebuild_keyword_index(KB).chunk_ids) == want

    def read() -> None:
        while not stop.is_set():
            try:
                index = KeywordIndex.load(directory)
            except Exception as exc:  # noqa: BLE001 - a torn index is what this test looks for
                torn.append(f"{type(exc).__name__}: {exc}")
                continue
            if index is None or len(index.chunk_ids) != want:
                torn.append(f"loaded {None if index is None else len(index.chunk_ids)} of {want} chunks")

    store.rebuild_keyword_index(KB)  # the index exists before the readers start
    writers = [Worker(rebuild) for _ in range(4)]
    readers = [Worker(read) for _ in range(2)]
    for w in writers + readers:
        w.start()
    errors = []
    for w in writers:
        try:
            w.outcome()
        except AssertionError as exc:
            errors.append(str(exc))
    stop.set()
    for r in readers:
        r.outcome()
    assert not errors, errors[:3]
    assert not torn, f"{len(torn)} torn reads, e.g. {torn[:3]}"
    assert sorted(p.name for p in store._keyword_dir(KB).iterdir()) == [directory.name], "temp dirs left behind"


def test_uploads_going_live_while_questions_run_are_reported_ready(kb_service: KnowledgeService) -> None:
    from tools.search import HybridSearcher

    searcher = HybridSearcher(kb_service.store, kb_service.embedder)
    assert kb_service.ingest_bytes(KB, "seed.md", _doc(0)).ok
    done = threading.Event()

    def ask() -> int:
        asked = 0
        while not done.is_set():
            searcher.search("who keeps the shift rota", KB, k=5)
            asked += 1
        return asked

    def upload() -> list:
        try:
            return [kb_service.ingest_bytes(KB, f"up{i}.md", _doc(i)) for i in range(1, 13)]
        finally:
            done.set()

    askers = [Worker(ask) for _ in range(2)]
    uploader = Worker(upload)
    for w in [*askers, uploader]:
        w.start()
    reports = uploader.outcome(300)
    for w in askers:
        assert w.outcome() > 0
    assert [d.status for r in reports for d in r.documents] == ["ready"] * 12, [r.to_json() for r in reports]
    assert_consistent(kb_service)
    hits = searcher.search("team T012 desk 1012", KB, k=3).evidence
    assert hits and hits[0].chunk.document == "up12.md"


# --- publish vs reindex, delete vs ingest -------------------------------------------------------------


def test_an_upload_publishing_while_reindex_switches_collections_is_not_lost(settings: Settings) -> None:
    """The upload wrote its chunks into the old collection; reindex switched to a new one (dropping the old)
    before the upload's flip. The upload must end ready AND retrievable, or failed with a reason."""
    with KnowledgeService(settings.tools) as uploader, KnowledgeService(settings.tools) as reindexer:
        uploader.create_kb(KB, "reindex race")
        assert uploader.ingest_bytes(KB, "a.md", _doc(1)).ok
        reached, resume = threading.Event(), threading.Event()
        _pause(uploader.store.registry, "publish_versions", reached, resume)
        upload = Worker(lambda: uploader.ingest_bytes(KB, "b.md", _doc(2, "night")))
        upload.start()
        assert reached.wait(120), "the upload never reached its flip"
        assert reindexer.reindex(KB) == 1  # a.md's one chunk; b.md is not live yet
        resume.set()
        result = upload.outcome().documents[0]

        assert_consistent(uploader)
        assert_consistent(reindexer)
        if result.status == "ready":
            texts = [c.text for c in reindexer.store.live_chunks(KB)]
            assert any("night rota 2" in t for t in texts), "b.md is ready but its chunks are gone"
        else:
            assert result.status == "failed" and result.error, result
        figures.add("lost", lost(reindexer))


def test_two_reindexes_of_one_kb_at_once_leave_it_whole(settings: Settings) -> None:
    """Both build a new collection from the same generation; one switches, the other is refused clearly
    and must clean up only its own collection, never the winner's."""
    from tools.store import KnowledgeBaseError

    with KnowledgeService(settings.tools) as first, KnowledgeService(settings.tools) as second:
        first.create_kb(KB, "reindex vs reindex")
        assert first.ingest_bytes(KB, "a.md", _doc(1)).ok
        reached, resume = threading.Event(), threading.Event()
        _pause(first.store.registry, "switch_collection", reached, resume)
        slow = Worker(lambda: first.reindex(KB))
        slow.start()
        assert reached.wait(120), "the first reindex never reached its switch"
        assert second.reindex(KB) == 1
        resume.set()
        slow.join(120)
        assert isinstance(slow.error, KnowledgeBaseError) and "changed while it was being re-indexed" in str(slow.error)
        assert [c.document for c in second.store.live_chunks(KB)] == ["a.md"]
        assert_consistent(second)
        figures.add("lost", lost(second))


def test_a_document_deleted_while_its_new_version_is_ingested(settings: Settings) -> None:
    """delete-doc lands between the upload's chunk write and its flip: the delete wins, the upload says so,
    and nothing of either version stays behind."""
    with KnowledgeService(settings.tools) as uploader, KnowledgeService(settings.tools) as deleter:
        uploader.create_kb(KB, "delete race")
        assert uploader.ingest_bytes(KB, "a.md", _doc(1)).ok
        reached, resume = threading.Event(), threading.Event()
        _pause(uploader.store.registry, "publish_versions", reached, resume)
        upload = Worker(lambda: uploader.ingest_bytes(KB, "a.md", _doc(2, "night")))
        upload.start()
        assert reached.wait(120)
        deleter.delete_document(KB, "a.md")
        resume.set()
        result = upload.outcome().documents[0]

        assert (result.status, "deleted" in (result.error or "")) == ("failed", True), result
        assert deleter.store.registry.get_document(KB, "a.md") is None
        assert deleter.store.live_chunks(KB) == []
        assert_consistent(deleter)
        # Nothing of either version is left in Chroma once the store is cleaned up.
        deleter.store.recover(KB)
        assert deleter.store.collection(KB).get(include=[])["ids"] == []


# --- every failure path of ingest ends ready or failed ---------------------------------------------------


def test_the_kb_deleted_while_an_ingest_parses_leaves_nothing_processing(
    kb_service: KnowledgeService, settings
) -> None:
    reached, resume = threading.Event(), threading.Event()

    def load() -> ParsedDocument:  # the document is being read (a slow download, a big PDF)
        reached.set()
        assert resume.wait(60)
        return ParsedDocument("Late", [Section("A late document about the shift rota.", "Late")])

    source = SourceDocument("late.md", content_hash(b"late", kb_service.ingestor.chunk_window), load)
    ingest = Worker(lambda: kb_service.ingestor.ingest_sources(KB, [source]))
    ingest.start()
    assert reached.wait(60)
    with KnowledgeService(settings.tools) as other:
        other.store.delete_kb(KB)
    resume.set()
    ingest.join(120)
    if ingest.error is None:
        result = ingest.result.documents[0]
        assert result.status == "failed" and KB in result.error, result
    else:  # a clear error is fine too, as long as nothing stays behind
        assert "no knowledge base" in str(ingest.error), ingest.error
    assert _pending_versions(settings) == []
    assert _leases(settings) == [], "the ingest still holds its lease"
    with KnowledgeService(settings.tools) as svc:
        assert svc.store.registry.list_documents(KB) == []


@pytest.mark.parametrize("has_v1", [False, True], ids=["first-version", "update"])
def test_a_registry_failure_at_the_flip_ends_failed_with_a_reason(
    has_v1: bool, kb_service: KnowledgeService, settings: Settings
) -> None:
    """SQLite refuses the flip (disk I/O error, locked past its timeout): injected at publish_versions."""
    if has_v1:
        assert kb_service.ingest_bytes(KB, "a.md", _doc(1)).ok
    registry = kb_service.store.registry
    real = registry.publish_versions
    calls = [0]

    def failing(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return real(*args, **kwargs)

    registry.publish_versions = failing
    report = kb_service.ingest_bytes(KB, "a.md", _doc(2, "night"))
    result = report.documents[0]
    assert result.status == "failed" and "could not embed or store it (OperationalError" in result.error, result
    assert _pending_versions(settings) == []
    assert _leases(settings) == []
    record = registry.get_document(KB, "a.md")
    if has_v1:
        assert (record.state, record.live_version) == ("ready", 1) and "last update failed" in record.error
    else:
        assert (record.state, record.live_version) == ("failed", None) and "OperationalError" in record.error
    assert_consistent(kb_service)
    # The next attempt goes through.
    assert kb_service.ingest_bytes(KB, "a.md", _doc(2, "night")).ok
    assert_consistent(kb_service)
