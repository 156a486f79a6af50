"""The chunk window: chunks fit the model's window with their header, and a KB ingested under one window
is re-chunked, never left "unchanged", when the window changes (real parser, real MiniLM, real Chroma)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.config import Settings
from tools.chunking import SPECIAL_TOKENS, ChunkWindow, chunk_document, chunk_header
from tools.embeddings import MINILM_MAX_TOKENS
from tools.parsing import ParsedDocument, Section, parse_file
from tools.service import KnowledgeService

KB = "window"


def _sentences(count: int) -> str:
    return " ".join(
        f"Clause {n} of the travel policy says that receipt number {n * 7} must be filed within {n % 9 + 2} days."
        for n in range(count)
    )


def _write_policy(path: Path) -> Path:
    path.write_text("# Travel policy\n\n" + _sentences(120) + "\n", encoding="utf-8")
    return path


def _tokenizer(service: KnowledgeService) -> Callable[[str], list]:
    return service.embedder.tokenize


def test_every_chunk_and_its_header_fit_the_model_window(service: KnowledgeService) -> None:
    tokenize = _tokenizer(service)
    long_title = "A very long report title about " + " ".join(f"topic{n}" for n in range(40))
    parsed = ParsedDocument(long_title, [Section(_sentences(80), long_title)])
    header_tokens = len(tokenize(chunk_header(long_title, long_title)))
    assert header_tokens > MINILM_MAX_TOKENS - SPECIAL_TOKENS - 240  # the title eats into a 240-piece chunk
    for window in (ChunkWindow(180, 24, MINILM_MAX_TOKENS), ChunkWindow(240, 0, MINILM_MAX_TOKENS)):
        drafts = chunk_document(parsed, tokenize, window)
        assert len(drafts) > 2
        for draft in drafts:
            assert header_tokens + len(tokenize(draft.text)) + SPECIAL_TOKENS <= MINILM_MAX_TOKENS
    # Without a window to fit, the same 240-piece chunks would run past what the model reads.
    unfitted = chunk_document(parsed, tokenize, ChunkWindow(240, 0))
    assert max(header_tokens + len(tokenize(d.text)) + SPECIAL_TOKENS for d in unfitted) > MINILM_MAX_TOKENS


def test_a_wider_window_makes_fewer_chunks_of_the_same_text(service: KnowledgeService) -> None:
    tokenize = _tokenizer(service)
    parsed = ParsedDocument("Policy", [Section(_sentences(120), "Policy")])
    narrow = chunk_document(parsed, tokenize, ChunkWindow(180, 24, MINILM_MAX_TOKENS))
    wide = chunk_document(parsed, tokenize, ChunkWindow(240, 0, MINILM_MAX_TOKENS))
    assert len(wide) < len(narrow)
    assert " ".join(d.text for d in wide).split() == _sentences(120).split()  # no overlap: the text once


@pytest.mark.parametrize(
    ("chunk", "overlap", "message"),
    [(32, 0, "at least"), (180, 100, "half"), (180, -1, "half")],
)
def test_a_window_that_makes_no_sense_is_refused(chunk: int, overlap: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ChunkWindow(chunk, overlap)


def test_settings_refuse_an_overlap_past_half_a_chunk(make_settings: Callable[..., Settings]) -> None:
    with pytest.raises(ValidationError, match="KBBOT_CHUNK_OVERLAP_TOKENS"):
        make_settings(chunk_tokens=180, chunk_overlap_tokens=120)
    with pytest.raises(ValidationError):
        make_settings(chunk_tokens=10)


def test_a_changed_window_rechunks_the_document_instead_of_keeping_the_old_chunks(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    doc = _write_policy(tmp_path / "policy.md")
    with KnowledgeService(make_settings(data).tools) as svc:
        svc.store.ensure_kb(KB, "travel", svc.embedder.model_name, svc.embedder.dimension)
        first = svc.ingest(KB, [doc])
        narrow = [c.text for c in svc.store.live_chunks(KB)]
        assert first.documents[0].status == "ready" and len(narrow) == first.documents[0].chunks
        assert svc.ingest(KB, [doc]).documents[0].status == "unchanged"

    wide_settings = make_settings(data, chunk_tokens=240, chunk_overlap_tokens=0)
    with KnowledgeService(wide_settings.tools) as svc:
        second = svc.ingest(KB, [doc])
        assert second.documents[0].status == "ready"  # the same bytes, but not the same chunks
        live = svc.store.live_chunks(KB)
        assert len(live) == second.documents[0].chunks < len(narrow)
        assert {c.version for c in live} == {live[0].version}  # one version, none of the old chunks
        expected = chunk_document(parse_file(doc), svc.embedder.tokenize, ChunkWindow(240, 0, MINILM_MAX_TOKENS))
        assert [c.text for c in live] == [d.text for d in expected]
        assert svc.ingest(KB, [doc]).documents[0].status == "unchanged"
