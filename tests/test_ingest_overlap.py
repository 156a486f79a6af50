"""Ingest prepares documents ahead of the model: while one group is being embedded, the next documents are
parsed and chunked on their own thread (bounded), groups published so far are live, and whatever the
preparing thread meets (a bad document, a broken model) ends up where it did before the overlap.

The embeddings come from an OpenAI-compatible endpoint on 127.0.0.1 (tests/helpers/fake_embeddings.py)
that can hold a request: the ingest is then provably mid-embedding, and the test looks at the store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.fake_embeddings import FakeEmbeddings
from helpers.settings import build_settings

import tools.ingest as ingest
from tools.chunking import ChunkWindow
from tools.ingest import IngestReport, SourceDocument, content_hash
from tools.parsing import ParsedDocument, Section, UnreadableDocument
from tools.service import KnowledgeService

KB = "overlap"
CHUNKS_PER_DOCUMENT = 4  # one section each: sections are never merged, so one chunk per section
DOCUMENTS = 12
GROUP_CHUNKS = 2 * CHUNKS_PER_DOCUMENT  # two documents per publish group
AHEAD_CHUNKS = 4 * CHUNKS_PER_DOCUMENT


@pytest.fixture
def endpoint() -> Iterator[FakeEmbeddings]:
    fake = FakeEmbeddings().start()
    yield fake
    fake.stop()


@pytest.fixture
def service(tmp_path: Path, endpoint: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch) -> Iterator[KnowledgeService]:
    monkeypatch.setattr(ingest, "PUBLISH_GROUP_CHUNKS", GROUP_CHUNKS)
    monkeypatch.setattr(ingest, "PREPARE_AHEAD_CHUNKS", AHEAD_CHUNKS)
    settings = build_settings(tmp_path / "data", KBBOT_KNOWLEDGE_BASES_DIR=tmp_path / "none", **endpoint.settings())
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "overlap test")
        yield svc


class Loads:
    """Which documents have been loaded (parsed) so far, and on which thread."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def source(self, number: int, broken: bool = False) -> SourceDocument:
        name = f"doc{number:02d}.md"
        sections = [
            Section(f"DOC{number:02d} part {part}: the pump in hall {number} is serviced every {part + 2} weeks.", "")
            for part in range(CHUNKS_PER_DOCUMENT)
        ]

        def load() -> ParsedDocument:
            with self._lock:
                self.names.append(name)
                self.threads.add(threading.current_thread().name)
            if broken:
                raise UnreadableDocument("the file is damaged")
            return ParsedDocument(f"Manual {number}", sections)

        return SourceDocument(name, content_hash(name.encode(), ChunkWindow()), load)


def live_documents(service: KnowledgeService) -> set[str]:
    return {d.name for d in service.store.registry.list_documents(KB) if d.live_version}


def wait_for(condition, what: str, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


def test_next_documents_are_prepared_while_a_group_embeds_and_earlier_groups_are_live(
    service: KnowledgeService, endpoint: FakeEmbeddings, tmp_path: Path
) -> None:
    loads = Loads()
    sources = [loads.source(n) for n in range(1, DOCUMENTS + 1)]
    marker = tmp_path / "held"
    endpoint.hold_on("DOC03", marker)  # the second group's request (documents 3 and 4)
    done: list[IngestReport] = []
    worker = threading.Thread(target=lambda: done.append(service.ingestor.ingest_sources(KB, sources)))
    worker.start()
    try:
        wait_for(marker.exists, "the second group's embedding request")
        # Progress is durable group by group: the first group is live while the second is embedded.
        assert live_documents(service) == {"doc01.md", "doc02.md"}
        # Meanwhile the documents after it are parsed and chunked...
        wait_for(lambda: len(loads.names) >= 6, "documents of the third group prepared during the embedding")
        # ...but only so far ahead: the held group, the bounded window and the one being prepared.
        time.sleep(0.3)
        assert len(loads.names) <= 4 + AHEAD_CHUNKS // CHUNKS_PER_DOCUMENT + 1 < DOCUMENTS
    finally:
        endpoint.release()
        worker.join(60)
    report = done[0]
    assert [d.status for d in report.documents] == ["ready"] * DOCUMENTS
    assert report.embedded_chunks == DOCUMENTS * CHUNKS_PER_DOCUMENT
    assert live_documents(service) == {s.name for s in sources}
    assert loads.names == [s.name for s in sources]  # each parsed once, in order
    assert threading.current_thread().name not in loads.threads and worker.name not in loads.threads


def test_a_bad_document_among_the_prepared_ones_fails_alone(service: KnowledgeService) -> None:
    loads = Loads()
    sources = [loads.source(n, broken=n == 5) for n in range(1, 9)]
    report = service.ingestor.ingest_sources(KB, sources)
    by_name = {d.document: d for d in report.documents}
    assert by_name["doc05.md"].status == "failed" and "damaged" in (by_name["doc05.md"].error or "")
    assert {n for n, d in by_name.items() if d.status == "ready"} == {s.name for s in sources} - {"doc05.md"}
    assert live_documents(service) == {s.name for s in sources} - {"doc05.md"}
    assert sorted(d.document for d in report.documents) == sorted(s.name for s in sources)  # one result each


def test_an_unusable_model_met_while_preparing_stops_the_ingest_and_publishes_nothing(
    service: KnowledgeService, endpoint: FakeEmbeddings
) -> None:
    from tools.embeddings import EmbeddingError

    class BrokenTokenizer:
        """The service's embedder, but its tokenizer (used while chunking) reports the model unusable."""

        def __init__(self, inner) -> None:
            self.inner, self.model_name, self.dimension = inner, inner.model_name, inner.dimension

        def embed_documents(self, texts, show_progress=False):
            return self.inner.embed_documents(texts, show_progress)

        def embed_query(self, text):
            return self.inner.embed_query(text)

        def tokenize(self, text):
            raise EmbeddingError("the embedding model is missing: run `make setup`")

    service.__dict__["embedder"] = BrokenTokenizer(service.embedder)
    requests_before = endpoint.requests  # the endpoint's dimension probe
    loads = Loads()
    with pytest.raises(EmbeddingError, match="make setup"):
        service.ingestor.ingest_sources(KB, [loads.source(n) for n in range(1, 5)])
    assert live_documents(service) == set()
    assert endpoint.requests == requests_before  # nothing was sent to be embedded
    assert [d.status for d in service.store.registry.list_documents(KB)] == []  # nothing begun
