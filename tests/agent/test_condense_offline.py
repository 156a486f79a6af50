"""The offline condenser on the shapes Slack follow-ups take: ellipsis ("what about …", "and for …"),
pronouns, "what if not", a condition added to the previous question."""

from __future__ import annotations

import pytest

from bot.agent.condense import asked_about, asks_what_next, condense_offline
from bot.agent.models import Turn


def condensed(question: str, *previous: str) -> str:
    return condense_offline(question, [Turn("user", p) for p in previous])


def test_a_condition_is_added_to_the_previous_question_not_swapped_into_it() -> None:
    # It became "How many vacation years do I get a year?": "five years" measures, it replaces nothing.
    rewrite = condensed("what about after five years?", "How many vacation days do I get a year?")
    assert "vacation days" in rewrite and "after five years" in rewrite
    assert "vacation years" not in rewrite


def test_a_like_for_like_swap_still_replaces() -> None:
    assert condensed("and SEV3?", "How fast must we respond to a SEV1?") == "How fast must we respond to a SEV3?"
    assert condensed("what about the Growth plan?", "How much does the Starter plan cost?") == (
        "How much does the Growth plan cost?"
    )


@pytest.mark.parametrize(
    ("follow_up", "previous", "expected"),
    [
        ("and if I don't?", "How long do I have to acknowledge a page?", "What happens if I don't acknowledge page?"),
        ("what if I can't?", "Do I have to submit receipts?", "What happens if I can't submit receipts?"),
        (
            "what if I don't?",
            "when do I need to finish the security awareness training?",
            "What happens if I don't finish security awareness training?",
        ),
        (
            "what if I don't spend it all?",
            "what's the learning budget per year?",
            "what's the learning budget per year if I don't spend it all?",
        ),
        ("and then what?", "how long does a release sit on staging?", "What happens after release sit staging?"),
        ("and if not?", "Must the canary pass before promotion?", "What happens if not canary pass promotion?"),
    ],
)
def test_what_if_not_asks_what_happens_then(follow_up: str, previous: str, expected: str) -> None:
    assert asks_what_next(follow_up)
    assert condensed(follow_up, previous) == expected


@pytest.mark.parametrize(
    "question",
    ["and if I don't?", "what if I miss it?", "then what?", "what happens next?", "and then?", "what if not?"],
)
def test_what_next_shapes(question: str) -> None:
    assert asks_what_next(question)


@pytest.mark.parametrize(
    "question",
    [
        "How long do I have to acknowledge a page?",
        "what about contractors?",
        "Is there a limit?",
        "what do v1 calls get back after that?",  # after a date, not after a step
    ],
)
def test_not_what_next(question: str) -> None:
    assert not asks_what_next(question)


def test_a_pronoun_stands_for_what_the_previous_question_asked_about() -> None:
    assert asked_about("What pressure should I pump my road bike tyres to?") == "pressure"
    assert asked_about("How many vacation days do I get?") == "vacation days"
    assert asked_about("Why is the sky blue?") is None
    assert (
        condensed("How often should I check it?", "What pressure should I pump my road bike tyres to?")
        == "How often should I check pressure?"
    )


def test_a_named_subject_still_wins_over_the_asked_about_phrase() -> None:
    assert condensed("when did she start?", "What was Anna Vissi's early career like?").startswith("when did Anna")


def test_a_question_that_stands_alone_is_unchanged() -> None:
    question = "How many sick days can I take without a doctor's note?"
    assert condensed(question, "How many vacation days do I get?") == question
