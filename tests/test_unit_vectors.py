"""Answer-unit vectors: each sentence of a chunk gets a vector pooled from the chunk's own forward pass
at ingest, saved beside the chunk's version, and the offline answer scores sentences with them instead
of encoding sentences at question time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.agent import answering
from tools.embeddings import embed_chunks, get_embedder
from tools.service import KnowledgeService
from tools.text import answer_units, split_sentences

KB = "scratch"

THREE_TOPICS = (
    "The Lisbon office opens at 07:45 on weekdays. "
    "Parental leave is sixteen weeks at full pay for every employee. "
    "Production database backups are encrypted and copied to a second region every night."
)


def unit_count_rows(service: KnowledgeService, kb: str) -> dict[tuple[str, int], int]:
    """(document, version) → how many chunks of it have saved unit vectors."""
    with service.store.registry._connect() as db:
        rows = db.execute(
            "SELECT document, version, COUNT(*) AS n FROM unit_vectors WHERE kb = ? GROUP BY document, version", (kb,)
        ).fetchall()
    return {(r["document"], r["version"]): r["n"] for r in rows}


def test_answer_units_know_where_they_sit_in_the_text() -> None:
    text = (
        "# Travel expenses\n\n- **Meals** are reimbursed up to $75 a day when travelling.\n- Taxi\n- Train\n\n"
        "报销时需要提供发票和行程单，并在系统中提交申请。一般在审批通过后的五个工作日内到账。"
    )
    units = answer_units(text)
    assert [u.text for u in units] == [
        "# Travel expenses",
        "Meals are reimbursed up to $75 a day when travelling.",
        "Taxi Train",
        "报销时需要提供发票和行程单，并在系统中提交申请。",
        "一般在审批通过后的五个工作日内到账。",
    ]
    assert [text[u.start : u.end] for u in units] == [
        "# Travel expenses",
        "- **Meals** are reimbursed up to $75 a day when travelling.",
        "- Taxi\n- Train",
        "报销时需要提供发票和行程单，并在系统中提交申请。",
        "一般在审批通过后的五个工作日内到账。",
    ]
    assert split_sentences(text) == [text[u.start : u.end] for u in units[:2]] + ["- Taxi", "- Train"] + [
        text[u.start : u.end] for u in units[3:]
    ]


def test_unit_vectors_are_pooled_from_the_same_pass(settings) -> None:
    from tools.store import StoredChunk

    embedder = get_embedder(settings)
    chunk = StoredChunk("k/d@v1#0", "k", "d", 1, 0, "Company handbook", "Overview", THREE_TOPICS)
    vectors, units = embed_chunks(embedder, [chunk])
    assert units is not None and len(units[0]) == len(answer_units(THREE_TOPICS)) == 3
    plain_vector = embedder.embed_documents([f"{chunk.header}\n{chunk.text}"])[0]
    assert float(vectors[0] @ plain_vector) > 0.999, "the chunk's own vector is unchanged"
    assert np.allclose(np.linalg.norm(units[0], axis=1), 1.0, atol=1e-4)
    # What the answer step asks of them: the sentence that answers a question scores highest.
    questions = ["When does the Lisbon office open?", "How long is parental leave?", "Are the backups encrypted?"]
    best = [int(np.argmax(units[0] @ embedder.embed_query(q))) for q in questions]
    assert best == [0, 1, 2]


def test_a_span_past_the_model_window_has_no_vector(settings) -> None:
    embedder = get_embedder(settings)
    long_text = "Filler words about nothing in particular. " * 60 + "The last sentence mentions the Lisbon office."
    spans = [(0, 41), (len(long_text) - 45, len(long_text))]
    _, units = embedder.embed_documents_with_units([long_text], [spans])
    assert not np.isnan(units[0][0]).any()
    assert np.isnan(units[0][1]).all()


def test_ingest_saves_unit_vectors_and_they_follow_the_version(service: KnowledgeService, tmp_path: Path) -> None:
    service.create_kb(KB, "scratch space")
    doc = tmp_path / "office.md"
    doc.write_text(f"# Office\n\n{THREE_TOPICS}\n", encoding="utf-8")
    assert service.ingest(KB, [doc]).documents[0].status == "ready"
    chunks = service.store.live_chunks(KB)
    embedder = service.embedder
    saved = service.store.unit_vectors(embedder.model_name, embedder.dimension, chunks)
    assert set(saved) == {c.chunk_id for c in chunks}
    assert all(len(saved[c.chunk_id]) == len(answer_units(c.text)) for c in chunks)
    # Saved with another model, they are not used.
    assert service.store.unit_vectors("another/model", embedder.dimension, chunks) == {}

    doc.write_text("# Office\n\nThe Lisbon office now opens at 09:15.\n", encoding="utf-8")
    assert service.ingest(KB, [doc]).documents[0].status == "ready"
    assert unit_count_rows(service, KB) == {("office.md", 2): 1}, "the replaced version's vectors are gone"

    service.delete_document(KB, "office.md")
    assert unit_count_rows(service, KB) == {}
    service.ingest(KB, [doc])
    service.store.delete_kb(KB)
    assert unit_count_rows(service, KB) == {}


def test_unit_vectors_read_again_are_the_saved_ones_and_read_only(service: KnowledgeService, tmp_path: Path) -> None:
    service.create_kb(KB, "scratch space")
    doc = tmp_path / "office.md"
    doc.write_text(f"# Office\n\n{THREE_TOPICS}\n", encoding="utf-8")
    assert service.ingest(KB, [doc]).documents[0].status == "ready"
    chunks, embedder = service.store.live_chunks(KB), service.embedder
    first = service.store.unit_vectors(embedder.model_name, embedder.dimension, chunks)
    again = service.store.unit_vectors(embedder.model_name, embedder.dimension, chunks)  # kept in memory now
    assert set(again) == set(first) == {c.chunk_id for c in chunks}
    assert all(np.array_equal(first[cid], again[cid]) for cid in first)
    with pytest.raises(ValueError):  # shared between questions: nobody may change them
        again[chunks[0].chunk_id][0, 0] = 1.0

    doc.write_text("# Office\n\nThe Lisbon office now opens at 09:15. Lunch is served at noon.\n", encoding="utf-8")
    assert service.ingest(KB, [doc]).documents[0].status == "ready"
    replaced = service.store.live_chunks(KB)
    saved = service.store.unit_vectors(embedder.model_name, embedder.dimension, replaced)
    assert set(saved) == {c.chunk_id for c in replaced} and not set(saved) & set(first)
    assert all(len(saved[c.chunk_id]) == len(answer_units(c.text)) for c in replaced)


def test_offline_answer_scores_sentences_with_saved_vectors(sample_service: KnowledgeService) -> None:
    from tools.search import HybridSearcher

    query = "How long is parental leave for employees?"
    embedder = sample_service.embedder
    evidence = HybridSearcher(sample_service.store, embedder).search(query, "people").evidence[:4]
    saved = sample_service.store.unit_vectors(embedder.model_name, embedder.dimension, [e.chunk for e in evidence])
    assert set(saved) == {e.chunk_id for e in evidence}

    def must_not_encode(texts: list[str]) -> np.ndarray:
        raise AssertionError(f"encoded {len(texts)} sentences at answer time")

    draft = answering.extractive_answer(
        query, evidence, embedder.embed_query(query), must_not_encode, unit_vectors=saved
    )
    assert draft is not None and draft.citations
    assert "week" in draft.text

    # Without saved vectors the same candidates are encoded now.
    encoded: list[str] = []

    def encode(texts: list[str]) -> np.ndarray:
        encoded.extend(texts)
        return embedder.embed_documents(texts)

    assert answering.extractive_answer(query, evidence, embedder.embed_query(query), encode) is not None
    assert 0 < len(encoded) <= answering.SEMANTIC_CANDIDATES
