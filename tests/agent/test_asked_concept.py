"""Refuse when the evidence never speaks of the asked concept (issue #13, ook-fact; bot/agent/concept.py).

On the sample KBs, offline: a question on a KB's own topic whose most important word no best passage states
and no close unit responds to ("the FY2027 bonus pool", "a poll in slack") is refused and the refusal names
that word; questions whose words the passages state, or answer by paraphrase, are still answered.
"""

from __future__ import annotations

import numpy as np
import pytest

from bot.agent import concept, grading


def _reasons(answer) -> str:
    return " | ".join(r.reason for r in answer.rounds)


def test_identifiers_stay_whole_and_brackets_close_phrases():
    asked = grading.asked_terms("in canada (lumen match 401k) for dispatch-db?")
    words = concept.ablation_words("in canada (lumen match 401k) for dispatch-db?", asked)
    assert "401k" in words and "dispatch-db" in words
    assert concept.without("how long do we keep dispatch-db backups?", "backups") == "how long do we keep dispatch-db ?"


def test_a_stated_word_costs_no_encode():
    def encode(texts):
        raise AssertionError("no word is unstated: nothing to encode")

    query = "how many vacation days do we get?"
    vectors = np.eye(4, dtype=np.float32)[:1]
    stated = ["Vacation: every employee gets 25 vacation days a year."]
    assert concept.unheard_word(query, grading.asked_terms(query), stated, vectors[0], vectors, encode) is None


@pytest.mark.parametrize(
    ("question", "word"),
    [
        ("how do i make a poll in slack?", "poll"),
        ("what's the FY2027 bonus pool?", "pool"),
    ],
)
def test_a_question_about_a_concept_no_passage_speaks_of_is_refused(offline_engine, question, word):
    answer = offline_engine.answer(question)

    assert answer.status == "insufficient_context", answer.answer
    assert f"never speaks of '{word}'" in _reasons(answer), _reasons(answer)


@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("which slack channels should I join on day one?", "#announcements"),
        ("how much does lumen match on the 401k?", "4%"),
    ],
)
def test_questions_the_passages_speak_of_are_still_answered(offline_engine, question, fact):
    answer = offline_engine.answer(question)

    assert answer.status == "answered", _reasons(answer)
    assert fact in answer.answer
