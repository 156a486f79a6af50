"""The policies' caches of per-chunk work (issue #12, Build 3: the CPU each question costs): a chunk's answer units,
their terms and phrases are kept on the chunk's text, so a republished document — the same chunk id, new text — is
measured anew, never with its old units; and every cache is bounded."""

from __future__ import annotations

import numpy as np
import pytest

from bot.agent import answering, grading, routing
from tools.search import Evidence
from tools.store import StoredChunk
from tools.text import _identifiers, content_terms, identifiers, joined_terms, keyword_terms, number_spans, text_terms

CHUNK_ID = "kb/parking.md@v1#0"  # the same id for both versions: the cache must not key on it alone
BEFORE = "Parking permits cost 40 euros a month. Apply at the front desk before the first of the month."
AFTER = "Parking permits are free for cyclists. Bicycle storage is in the basement next to the lifts."


def evidence_of(text: str, location: str = "Facilities > Parking") -> Evidence:
    chunk = StoredChunk(CHUNK_ID, "kb", "parking.md", 1, 0, "Parking", location, text)
    return Evidence(chunk, 0.9, 0.6, 2.0)


def unit_vectors_for(text: str, seed: int) -> np.ndarray:
    """One normalised vector per answer unit (the shape ingest saves), arbitrary but fixed."""
    count = len(grading.answer_units(text))
    vectors = np.random.default_rng(seed).normal(size=(count, 8)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def fresh(measure):
    """What `measure()` gives with every cache empty: the reference a cached answer must equal."""
    for cache in (
        grading.chunk_units,
        answering._terms,
        answering._phrases,
        answering._bodies_of,
        answering._reads_as_syntax,
        number_spans,
        _identifiers,
    ):
        cache.cache_clear()
    return measure()


def test_a_republished_chunk_is_measured_by_its_new_units() -> None:
    query = "How much does a parking permit cost?"
    query_vector = np.ones(8, dtype=np.float32) / np.sqrt(8)
    before = grading.unit_matches(query, [evidence_of(BEFORE)], query_vector, {CHUNK_ID: unit_vectors_for(BEFORE, 1)})
    assert {u.text for u in before} == {u.text for u in grading.answer_units(BEFORE)}

    def measure_after():
        return grading.unit_matches(query, [evidence_of(AFTER)], query_vector, {CHUNK_ID: unit_vectors_for(AFTER, 2)})

    after = measure_after()  # the old version's units are still cached
    assert {u.text for u in after} == {u.text for u in grading.answer_units(AFTER)}
    assert after == fresh(measure_after)
    # Its heading counts for every unit: a chunk moved under another heading is measured under that one.
    moved = grading.unit_matches(
        "Where is the bicycle storage in the basement?",
        [evidence_of(AFTER, "Facilities > Lifts")],
        query_vector,
        {CHUNK_ID: unit_vectors_for(AFTER, 2)},
    )
    assert moved == fresh(
        lambda: grading.unit_matches(
            "Where is the bicycle storage in the basement?",
            [evidence_of(AFTER, "Facilities > Lifts")],
            query_vector,
            {CHUNK_ID: unit_vectors_for(AFTER, 2)},
        )
    )


def test_a_republished_chunk_is_answered_from_its_new_text() -> None:
    query = "Is parking free for cyclists?"
    first = answering.extractive_answer(query, [evidence_of(BEFORE)])
    assert first is None or "cyclists" not in first.text

    def answer_after():
        return answering.extractive_answer(query, [evidence_of(AFTER)])

    after = answer_after()
    assert after is not None and "free for cyclists" in after.text
    assert after == fresh(answer_after)
    assert answering.score_units(query, [evidence_of(AFTER)]) == fresh(
        lambda: answering.score_units(query, [evidence_of(AFTER)])
    )


@pytest.mark.parametrize(
    "cache",
    [
        grading.chunk_units,
        answering._terms,
        answering._phrases,
        answering._bodies_of,
        answering._reads_as_syntax,
        text_terms,
        number_spans,
        _identifiers,
    ],
    ids=lambda c: c.__name__,
)
def test_the_per_chunk_caches_are_bounded(cache) -> None:
    limit = cache.cache_info().maxsize
    assert limit is not None
    for i in range(limit + 50):
        text = f"Sentence number {i} of many. Another one {i}."
        if cache is grading.chunk_units:
            cache(f"Heading {i}", text)
        else:
            cache(text)
    assert cache.cache_info().currsize <= limit


TEXTS = [
    "Parking permits cost 40 euros a month.",
    "It's the employee's own responsibility; don’t forget.",
    "unroutable_address SEV1 401(k) v4.12.0",
    "报销政策 需要 经理 批准",
    "年假 is 15 days",
    "ΟΔΟΣ ΑΣ Σ",  # Greek capital sigma lower-cases by its place in the word
    "İstanbul office",
    "",
    "'s",
    "the and of",
]


def test_joined_terms_are_the_terms_of_the_joined_text() -> None:
    for first in TEXTS:
        for second in TEXTS:
            assert joined_terms(first, second) == content_terms(f"{first}\n{second}"), (first, second)
            assert joined_terms(first, second) == content_terms(f"{first} {second}"), (first, second)
    taken = joined_terms(TEXTS[0], TEXTS[1])
    taken.add("changed")  # a copy: the cached terms of either text are unchanged
    assert "changed" not in joined_terms(TEXTS[0], TEXTS[1])


@pytest.mark.parametrize("keep_stopwords", [False, True])
def test_keyword_terms_of_text_without_cjk_are_those_with_it(keep_stopwords: bool) -> None:
    # A text without CJK takes a shorter path; its terms are what the full path gives the same words.
    for text in TEXTS:
        if any("\u4e00" <= ch <= "\u9fff" for ch in text):
            continue
        assert keyword_terms(f"{text} 报", keep_stopwords=keep_stopwords) == [
            "报",
            *keyword_terms(text, keep_stopwords=keep_stopwords),
        ], text


def test_text_terms_are_keyword_terms_in_order() -> None:
    for text in TEXTS:
        assert list(text_terms(text)) == keyword_terms(text), text
    assert text_terms("the permit, the permit and the permit") == ("permit", "permit", "permit")


def test_the_probe_ranks_by_the_units_grading_measures() -> None:
    # The probe re-ranks by each chunk's units without building grading's UnitMatch (its answer types are not
    # read there); the best unit's score must be the one the UnitMatches give.
    query_vector = np.ones(8, dtype=np.float32) / np.sqrt(8)
    for text, seed in ((BEFORE, 1), (AFTER, 2)):
        e, saved = evidence_of(text), {CHUNK_ID: unit_vectors_for(text, seed)}
        for query in ("How much does a parking permit cost?", "Where is the bicycle storage?", "停车费多少钱?"):
            matches = grading.unit_matches(query, [e], query_vector, saved)
            measures = grading.unit_measures(grading.QueryTerms.of(query), e, query_vector, saved)
            assert [(u.text, u.cosine, u.coverage) for u in matches] == sorted(
                ((unit.text, cosine, coverage) for unit, cosine, coverage in measures), key=lambda m: -m[1]
            )
            assert routing.unit_score((c, v) for _, c, v in measures) == max(
                u.cosine + routing.UNIT_COVERAGE_WEIGHT * u.coverage for u in matches
            )
    assert grading.unit_measures(grading.QueryTerms.of("parking"), evidence_of(BEFORE), query_vector, {}) == []


def test_identifiers_are_a_fresh_list_each_time() -> None:
    # Cached per text: a caller changing its list must not change what the next caller reads.
    first = identifiers("Is SEV1 paged for unroutable_address and 401k?")
    assert first == ["SEV1", "unroutable_address", "401k"]
    first.append("changed")
    assert identifiers("Is SEV1 paged for unroutable_address and 401k?") == ["SEV1", "unroutable_address", "401k"]


NUMBER_TEXTS = [
    "Up to two monitors, twenty-five days, a hundred euros, one million users, a fortnight.",
    "TWO WEEKS' notice; Twenty Five; Ninety-nine; a Thousand; ONE BILLION.",
    "Often the tenant attends; someone, anyone, a one-off; x_two two2 2two.",
    "Payments over $5,000.50 need 3 approvals within 48 hours (v4.12.0, SEV1, 401k).",
    "Ｔwo days, ２ days, ٣ days, twο (a Greek omicron), naïve two, ＴＷＯ",
    "年假15天，两周，十五天，超过五千元",
    "",
    "a",
    "one",
    "zero-downtime deploys",
]


def _corpus() -> list[str]:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    texts = list(NUMBER_TEXTS)
    for folder in ("knowledge_bases", "benchmarks/company/questions"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".md", ".txt", ".jsonl", ".csv") and path.is_file():
                texts += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return texts


def test_reading_numbers_skips_no_number() -> None:
    # number_spans and the worded amounts skip their patterns on a text with no digit or no number word; what they
    # find must be what the patterns alone find.
    from tools import text

    for line in _corpus():
        for piece in (line, line.upper(), line.title()):
            numerals = [m.span() for m in text._NUMERAL.finditer(piece)]
            worded = [m.span() for m in text._NUMBER_WORD.finditer(piece) if text._worded_value(m) is not None]
            if not text._DIGIT.search(piece):
                assert not numerals, piece
            if not text._may_write_number_words(piece):
                assert not worded, piece
