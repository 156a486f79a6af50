"""The answer step reads at most MAX_EVIDENCE_CHUNKS of the round's near-best chunks (scripts/measure_unit_recall.py
asks where that cut falls among all of them: `limit`): more candidates, more coincidental-word picks."""

from __future__ import annotations

from bot.agent import answering
from tools.search import Evidence
from tools.store import StoredChunk


def evidence(n: int) -> list[Evidence]:
    chunks = [
        StoredChunk(f"kb/doc{i}.md@v1#0", "kb", f"doc{i}.md", 1, 0, f"doc{i}.md", "", f"Text {i}.") for i in range(n)
    ]
    return [Evidence(c, 0.9 - 0.01 * i, 0.5, 2.0) for i, c in enumerate(chunks)]


def test_the_answer_step_reads_the_best_chunks_up_to_its_cut() -> None:
    found = evidence(8)
    read = answering.select_evidence(found)
    assert [e.chunk_id for e in read] == [e.chunk_id for e in found[: answering.MAX_EVIDENCE_CHUNKS]]


def test_a_measurement_sees_past_the_cut_in_the_same_order() -> None:
    found = evidence(8)
    everything = answering.select_evidence(found, limit=len(found))
    assert everything[: answering.MAX_EVIDENCE_CHUNKS] == answering.select_evidence(found)
    assert len(everything) == 8


def test_graded_relevant_chunks_are_cut_alike() -> None:
    found = evidence(8)
    relevant = [e.chunk_id for e in found[2:]]
    assert [e.chunk_id for e in answering.select_evidence(found, relevant)] == relevant[: answering.MAX_EVIDENCE_CHUNKS]
    assert [e.chunk_id for e in answering.select_evidence(found, relevant, limit=8)] == relevant
