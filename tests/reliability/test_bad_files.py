"""Bad files: every kind is refused with one clear line naming the problem (and the limit and its
setting, where a limit is what refused it), within a time bound, leaving the KB exactly as it was
(registry and search results), and the process alive — through KnowledgeService, and for a few through
the `kbbot` CLI. Unusual-but-good inputs (legacy encodings, a directory named like a file) ingest right.

The hostile files are built here (tests/helpers/hostile.py): nothing binary is committed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import figures, hostile
from helpers.cli import run_kbbot
from helpers.documents import encrypt_pdf, write_corrupt_pdf, write_docx_zip_bomb, write_pdf

from bot.config import Settings
from tools.search import HybridSearcher
from tools.service import KnowledgeService

KB = "hostile"
QUERIES = ("How many days of remote work are allowed?", "visitor badge colour")


@pytest.fixture
def kb(service: KnowledgeService, tmp_path: Path) -> str:
    """A KB holding one good document, so "unchanged" is about something."""
    service.create_kb(KB, "Scratch knowledge base for hostile files")
    good = tmp_path / "good" / "remote-work.md"
    good.parent.mkdir()
    good.write_text(
        "# Remote work\n\nEmployees may work remotely up to 3 days a week. Visitors wear a red badge.\n",
        encoding="utf-8",
    )
    assert service.ingest(KB, [good]).ok
    return KB


def fingerprint(service: KnowledgeService, kb: str) -> tuple:
    """What people can see of a KB: its registry rows and what searching it returns."""
    registry = service.store.registry
    documents = [(d.name, d.state, d.live_version, d.live_hash, d.live_chunks) for d in registry.list_documents(kb)]
    searcher = HybridSearcher(service.store, service.embedder)
    hits = [[(e.chunk_id, round(e.score, 6)) for e in searcher.search(q, kb, k=5).evidence] for q in QUERIES]
    return documents, service.store.collection(kb).count(), hits


def refused(
    service: KnowledgeService, kb: str, path: Path, *words: str, within_s: float = 5.0, upload: bool = False
) -> str:
    """Ingest `path` (as a file, or as uploaded bytes); assert one clear failure naming `words`, within
    `within_s`, and the KB unchanged. Returns the error line."""
    before = fingerprint(service, kb)
    started = time.monotonic()
    report = service.ingest_bytes(kb, path.name, path.read_bytes()) if upload else service.ingest(kb, [path])
    elapsed = time.monotonic() - started
    assert [d.status for d in report.documents] == ["failed"], report.to_json()
    error = report.documents[0].error
    assert path.name in error.split(": ")[0] and "\n" not in error, error
    for word in words:
        assert word in error, f"{word!r} not in {error!r}"
    assert elapsed < within_s, f"took {elapsed:.1f} s (bound {within_s} s): {error}"
    assert fingerprint(service, kb) == before, "a refused file changed the KB"
    figures.add("bad_inputs_tried")
    return error


# --- PDF ----------------------------------------------------------------------------------------


def test_corrupt_pdf(service, kb, tmp_path: Path) -> None:
    refused(service, kb, write_corrupt_pdf(tmp_path / "broken.pdf"), "corrupt PDF")


def test_encrypted_pdf(service, kb, tmp_path: Path) -> None:
    plain = write_pdf(tmp_path / "plain.pdf", ["Salary bands for 2027."])
    refused(service, kb, encrypt_pdf(plain, tmp_path / "salaries.pdf"), "encrypted", upload=True)


def test_pdf_stream_bomb_is_refused_at_the_inflation_limit(service, kb, tmp_path: Path) -> None:
    bomb = hostile.pdf_stream_bomb(tmp_path / "bomb.pdf", inflated_mb=200)
    assert bomb.stat().st_size < 400_000
    refused(service, kb, bomb, "inflates past the limit", "KBBOT_MAX_INFLATED_MB")


def test_pdf_declaring_100k_pages_is_refused_before_walking_them(service, kb, tmp_path: Path) -> None:
    refused(
        service,
        kb,
        hostile.pdf_declaring_pages(tmp_path / "claims.pdf", 100_000),
        "declares 100,000 pages",
        "limit of 2,000 pages",
        "KBBOT_MAX_PDF_PAGES",
        within_s=3,
    )


def test_pdf_hiding_5000_pages_behind_a_small_count(service, kb, tmp_path: Path) -> None:
    refused(
        service,
        kb,
        hostile.pdf_with_shared_pages(tmp_path / "shared.pdf", 5000, declared=1),
        "has 5,000 pages",
        "KBBOT_MAX_PDF_PAGES",
    )


def test_slow_pdf_is_killed_at_the_time_limit_and_nothing_holds_the_kb(service, kb, tmp_path: Path) -> None:
    """Text extraction that no pure-Python check can interrupt: the worker is killed at the limit; while
    it runs, the KB stays readable; afterwards a good file ingests (a fresh worker)."""
    from tools.parsing import ParseLimits

    slow = hostile.pdf_slow_content(tmp_path / "slow.pdf")
    assert slow.stat().st_size < 200_000
    service.ingestor.parse_limits = ParseLimits(timeout_s=1.0)
    before = fingerprint(service, kb)
    searcher = HybridSearcher(service.store, service.embedder)
    errors: list[str] = []
    ingest = threading.Thread(
        target=lambda: errors.append(
            refused(service, kb, slow, "longer than the limit of 1 s", "KBBOT_PARSE_TIMEOUT_S", within_s=4)
        )
    )
    ingest.start()
    time.sleep(0.3)
    while ingest.is_alive():  # reads are never blocked by the parse in flight
        started = time.monotonic()
        assert searcher.search(QUERIES[0], kb, k=3).evidence
        assert service.store.registry.list_documents(kb)
        assert time.monotonic() - started < 0.5
        time.sleep(0.1)
    ingest.join()
    assert errors, "the refusal assertions failed in the thread"
    assert fingerprint(service, kb) == before
    good = tmp_path / "after.md"
    good.write_text("# After\n\nThe parking garage opens at 7 am.\n", encoding="utf-8")
    assert service.ingest(kb, [good]).ok


def test_parse_over_the_memory_cap_fails_cleanly(service, kb, tmp_path: Path) -> None:
    from tools.parsing import ParseLimits

    service.ingestor.parse_limits = ParseLimits(max_memory_mb=300, max_chars=50_000_000)
    big = tmp_path / "big.md"
    big.write_text("# Big\n\n" + "word " * 4_000_000, encoding="utf-8")  # 20 MB of text
    refused(service, kb, big, "more memory than the limit of 300 MB", "KBBOT_PARSE_MAX_MEMORY_MB", within_s=20)
    good = tmp_path / "after.md"
    good.write_text("# After\n\nThe parking garage opens at 7 am.\n", encoding="utf-8")
    assert service.ingest(kb, [good]).ok


# --- DOCX ---------------------------------------------------------------------------------------


def test_docx_zip_bomb(service, kb, tmp_path: Path) -> None:
    refused(
        service,
        kb,
        write_docx_zip_bomb(tmp_path / "bomb.docx", inflated_mb=300),
        "zip bomb",
        "KBBOT_MAX_INFLATED_MB",
        within_s=2,
    )


def test_docx_entity_bomb(service, kb, tmp_path: Path) -> None:
    refused(
        service,
        kb,
        hostile.docx_entity_bomb(tmp_path / "laughs.docx"),
        "XML entities",
        "DOCTYPE",
        within_s=2,
        upload=True,
    )


def test_docx_nested_100k_deep(service, kb, tmp_path: Path) -> None:
    refused(service, kb, hostile.docx_deep_xml(tmp_path / "deep.docx"), "levels deep", "KBBOT_MAX_NESTING_DEPTH")


def test_docx_lying_about_its_sizes(service, kb, tmp_path: Path) -> None:
    refused(
        service,
        kb,
        hostile.docx_lying_sizes(tmp_path / "liar.docx"),
        "word/document.xml",
        "does not match its checksum",
        within_s=2,
    )


# --- HTML, text, encodings -----------------------------------------------------------------------


def test_html_nested_100k_divs(service, kb, tmp_path: Path) -> None:
    refused(
        service,
        kb,
        hostile.deep_html(tmp_path / "deep.html"),
        "nests elements more than 256 levels",
        "KBBOT_MAX_NESTING_DEPTH",
        within_s=2,
    )


def test_empty_file(service, kb, tmp_path: Path) -> None:
    (tmp_path / "blank.md").write_bytes(b"  \n\t\n")
    refused(service, kb, tmp_path / "blank.md", "empty")


def test_binary_named_txt(service, kb, tmp_path: Path) -> None:
    (tmp_path / "photo.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 64)
    refused(service, kb, tmp_path / "photo.txt", "binary", upload=True)


def test_pdf_named_docx(service, kb, tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "real.pdf", ["A PDF wearing a .docx name."])
    (tmp_path / "letter.docx").write_bytes(pdf.read_bytes())
    refused(service, kb, tmp_path / "letter.docx", "not a zip archive")


def test_zip_named_pdf(service, kb, tmp_path: Path) -> None:
    refused(service, kb, hostile.zip_named_pdf(tmp_path / "archive.pdf"), "not a PDF")


def test_huge_single_line_over_the_character_limit(service, kb, tmp_path: Path) -> None:
    line = tmp_path / "line.txt"
    line.write_bytes(b"x" * 6_000_000)
    refused(service, kb, line, "more than 5,000,000 characters", "KBBOT_MAX_DOCUMENT_CHARS")


def test_huge_single_line_under_the_limit_ingests_in_bounded_chunks(service, kb, tmp_path: Path) -> None:
    """A 'word' with no space and a CJK paragraph with no full stop: chunked in bounded pieces, fast
    (before: a 1 MB word was one 1 MB chunk, and CJK without a full stop chunked at about 50 s per MB)."""
    from tools.chunking import chunk_document
    from tools.parsing import parse_file

    blob, cjk = tmp_path / "blob.txt", tmp_path / "cjk.txt"
    blob.write_bytes(b"QUJD" * 250_000)  # 1 MB, one line
    cjk.write_text("员工因公出差产生的交通费住宿费和餐费可以报销" * 20_000, encoding="utf-8")  # 440k chars
    for path in (blob, cjk):
        started = time.monotonic()
        drafts = chunk_document(parse_file(path), service.embedder.tokenize)
        assert time.monotonic() - started < 15, path.name
        assert max(len(d.text) for d in drafts) <= 1000 and len(drafts) > 100
        assert all(len(service.embedder.tokenize(d.text)) <= 180 for d in drafts[:50])
    assert "".join(d.text for d in chunk_document(parse_file(blob), service.embedder.tokenize)) == "QUJD" * 250_000
    # And end to end, small enough to embed quickly.
    blob.write_bytes(b"QUJD" * 5_000)
    report = service.ingest(kb, [blob])
    assert report.ok, report.to_json()
    chunks = [c for c in service.store.live_chunks(kb) if c.document == "blob.txt"]
    assert len(chunks) > 10 and max(len(c.text) for c in chunks) <= 1000
    figures.add("bad_inputs_tried")


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("latin1.txt", "Le café coûte 2 francs; la façade rénovée ouvre à 9 h.".encode("latin-1"), "façade rénovée"),
        ("utf16-bom.txt", "Remote work: three days a week, café included.".encode("utf-16"), "café included"),
        ("utf16-nobom.txt", "Remote work: three days a week, café included.".encode("utf-16-le"), "café included"),
        (
            "sjis.txt",
            "東京オフィスの勤務時間は午前九時から午後六時までです。".encode("shift_jis"),
            "午前九時から午後六時",
        ),
    ],
)
def test_non_utf8_text_ingests_with_the_right_characters(service, kb, name: str, data: bytes, expected: str) -> None:
    report = service.ingest_bytes(kb, name, data)
    assert [d.status for d in report.documents] == ["ready"], report.to_json()
    assert any(expected in c.text for c in service.store.live_chunks(kb) if c.document == name)
    figures.add("bad_inputs_tried")


# --- sizes, names, the file system --------------------------------------------------------------


def test_oversize_with_and_without_size_metadata(make_settings, tmp_path: Path) -> None:
    """Refused from the file's size (a 10 GB sparse file is never read) and from the bytes' length."""
    with KnowledgeService(make_settings(KBBOT_MAX_UPLOAD_MB=0.01).tools) as svc:
        svc.create_kb(KB, "size limits")
        big = tmp_path / "big.md"
        big.write_text("# Big\n\n" + "All work and no play. " * 2000, encoding="utf-8")
        sparse = tmp_path / "sparse.txt"
        with sparse.open("wb") as handle:
            handle.truncate(10 << 30)
        for path, upload in ((big, False), (sparse, False), (big, True)):
            refused(svc, KB, path, "over the 0.01 MB upload limit (KBBOT_MAX_UPLOAD_MB)", within_s=2, upload=upload)


def test_same_name_twice_in_one_upload_batch(service, kb) -> None:
    before = fingerprint(service, kb)
    report = service.ingest_uploads(
        kb,
        [
            ("handbook.md", b"# Handbook\n\nVersion one.\n", "https://files.slack.example/F111"),
            ("handbook.md", b"# Handbook\n\nVersion two.\n", "https://files.slack.example/F222"),
        ],
    )
    assert [d.status for d in report.documents] == ["failed"]
    error = report.documents[0].error
    assert "2 files in this batch have this name" in error and "F111" in error and "F222" in error
    assert fingerprint(service, kb) == before
    figures.add("bad_inputs_tried")


def test_symlink_loop_and_a_folder_named_like_a_file(service, kb, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    (folder / "guide.md").mkdir(parents=True)  # a directory named like a file: its contents are documents
    (folder / "guide.md" / "intro.md").write_text("# Intro\n\nThe canteen opens at noon.\n", encoding="utf-8")
    (folder / "loop.md").symlink_to("loop.md")
    (folder / "gone.md").symlink_to(tmp_path / "nowhere.md")
    report = service.ingest(kb, [folder])
    assert report.ok, report.to_json()
    statuses = {d.document: (d.status, d.reason) for d in report.documents}
    assert statuses["guide.md/intro.md"] == ("ready", None)
    assert statuses["loop.md"] == ("skipped", "a broken or looping symbolic link")
    assert statuses["gone.md"][0] == "skipped"
    before = fingerprint(service, kb)
    error = refused(service, kb, folder / "loop.md", "broken or looping symbolic link")
    assert fingerprint(service, kb) == before, error
    figures.add("bad_inputs_tried")


def test_fifo_named_txt_is_never_opened(service, kb, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)  # opening it for reading would block forever
    refused(service, kb, fifo, "not a regular file", within_s=2)


def test_unsupported_types_inside_a_folder_are_skipped(service, kb, tmp_path: Path) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    for name, data in (
        ("style.css", b"body{}"),
        ("build.sh", b"#!/bin/sh\n"),
        ("dump.gz", b"\x1f\x8b\x08"),
        ("Makefile", b"all:\n"),
    ):
        (folder / name).write_bytes(data)
    (folder / "page.md").write_text("# Page\n\nThe badge office is in room 12.\n", encoding="utf-8")
    report = service.ingest(kb, [folder])
    assert report.ok
    statuses = {d.document: (d.status, d.reason) for d in report.documents}
    assert statuses["page.md"] == ("ready", None)
    assert statuses["style.css"] == ("skipped", statuses["style.css"][1]) and "'.css'" in statuses["style.css"][1]
    assert {n for n, (s, _) in statuses.items() if s == "skipped"} == {"style.css", "build.sh", "dump.gz", "Makefile"}
    assert "'(none)'" in statuses["Makefile"][1]
    figures.add("bad_inputs_tried")


def test_a_file_that_changes_while_being_ingested(service, kb, tmp_path: Path) -> None:
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "a-empty.md").write_bytes(b"")
    moving = folder / "b-moving.md"
    moving.write_text("# Moving\n\nFirst text.\n", encoding="utf-8")
    before = fingerprint(service, kb)

    def change_the_next_file(result) -> None:  # called as the first file's result comes in
        if result.document == "a-empty.md":
            moving.write_text("# Moving\n\nSomething else entirely, written mid-ingest.\n", encoding="utf-8")

    report = service.ingestor.ingest_paths(kb, [folder], on_result=change_the_next_file)
    errors = {d.document: d.error for d in report.documents}
    assert "changed while it was being ingested" in errors["b-moving.md"]
    assert fingerprint(service, kb) == before
    figures.add("bad_inputs_tried")


# --- through the CLI --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: hostile.pdf_declaring_pages(d / "claims.pdf"), ("KBBOT_MAX_PDF_PAGES",)),
        (lambda d: hostile.deep_html(d / "deep.html"), ("KBBOT_MAX_NESTING_DEPTH",)),
        (lambda d: hostile.docx_entity_bomb(d / "laughs.docx"), ("XML entities",)),
    ],
    ids=["pdf-pages", "deep-html", "entity-bomb"],
)
def test_cli_refuses_in_one_line_and_changes_nothing(
    make: Callable[[Path], Path], words: tuple[str, ...], settings: Settings, tmp_path: Path, run_cli
) -> None:
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "CLI hostile files")
    path = make(tmp_path)
    result = run_cli(settings, "ingest", "--kb", KB, str(path), "--json")
    assert result.code == 1
    documents = json.loads(result.out)["documents"]
    assert [d["status"] for d in documents] == ["failed"]
    assert all(w in documents[0]["error"] for w in words), documents[0]["error"]
    with KnowledgeService(settings.tools) as svc:
        assert svc.store.registry.list_documents(KB) == []
    figures.add("bad_inputs_tried")


def test_a_separate_kbbot_process_survives_a_folder_of_bad_files(settings: Settings, tmp_path: Path) -> None:
    """`kbbot ingest` as people run it (a process of its own), on a folder of hostile files and junk."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    hostile.pdf_stream_bomb(folder / "bomb.pdf")
    hostile.deep_html(folder / "deep.html")
    write_docx_zip_bomb(folder / "zip.docx", inflated_mb=300)
    (folder / "notes.css").write_text("body{}", encoding="utf-8")
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "CLI hostile folder")
    started = time.monotonic()
    done = run_kbbot(settings, "ingest", "--kb", KB, str(folder))
    assert time.monotonic() - started < 60
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "- hostile/notes.css: skipped" in done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 3 and all(("limit" in e or "zip bomb" in e) for e in errors), errors
    assert "0 ok, 3 failed, 1 skipped" in done.stdout
    figures.add("bad_inputs_tried")
