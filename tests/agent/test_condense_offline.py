"""The offline condenser on the shapes Slack follow-ups take: ellipsis ("what about …", "and for …"),
pronouns, "what if not", a condition added to the previous question."""

from __future__ import annotations

import pytest

from bot.agent.condense import (
    asked_about,
    asks_for_something_else,
    asks_what_next,
    compares,
    condense_offline,
    what_next_kind,
)
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
        ("and if I don't?", "How long do I have to acknowledge a page?", "What happens if I don't acknowledge a page?"),
        ("what if I can't?", "Do I have to submit receipts?", "What happens if I can't submit receipts?"),
        # "fast" asks how quickly; what must be done is "ack a page", as the question said it.
        ("and if i don't?", "how fast do i have to ack a page?", "What happens if i don't ack a page?"),
        (
            "what if I don't?",
            "when do I need to finish the security awareness training?",
            "What happens if I don't finish the security awareness training?",
        ),
        (
            "what if I don't spend it all?",
            "what's the learning budget per year?",
            # It was "what's the learning budget per year if I don't spend it all?", which asked the amount again.
            "What happens to the learning budget if I don't spend it all?",
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


def thread(*turns: str) -> list[Turn]:
    """User and assistant turns, alternating, the user first."""
    return [Turn("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(turns)]


def test_a_thread_of_ellipses_is_completed_turn_by_turn() -> None:
    # "and everywhere else?" became "everywhere else (berlin)": the previous turn was itself an ellipsis.
    history = thread(
        "what's the hotel cap in London?",
        "Tier 1 New York, San Francisco, London, Zurich $260 [1]",
        "and in Berlin?",
        "Austin, Amsterdam, Rotterdam, Berlin, Chicago $190 Tier 3 All other cities $150 [1]",
    )
    assert condense_offline("and in Berlin?", history[:2]) == "what's the hotel cap in Berlin?"
    assert condense_offline("and everywhere else?", history) == "what's the hotel cap everywhere else?"


def test_a_name_the_answer_wrote_is_swapped_even_when_typed_lower_case() -> None:
    # "and growth?" became "growth (starter per truck)": still asking about Starter.
    history = thread("how much is starter per truck?", "Starter: $29 per vehicle per month billed annually. [1]")
    assert condense_offline("and growth?", history) == "how much is growth per truck?"
    assert condense_offline("and the premium plan?", history) == "how much is premium per truck?"
    # A word the answer does not write as a name is not one: no swap, the thread's words are carried.
    plain = thread("how many stops fit in one optimization plan?", "A plan can contain up to 2,000 stops. [1]")
    assert condense_offline("and vehicles?", plain).startswith("vehicles (")


def test_a_renumbered_thing_is_the_same_question_renumbered() -> None:
    # "what about tier 4?" became "tier 4 (what's nightly hotel cap cities)", which found tier 2's figure.
    assert condensed("what about tier 4?", "what's the nightly hotel cap in tier 2 cities?") == (
        "what's the nightly hotel cap in tier 4 cities?"
    )
    assert condensed("and series B?", "how much did we raise in the series A?") == (
        "how much did we raise in the series B?"
    )


def test_a_comparison_ranges_over_what_the_thread_asked_without_its_codes() -> None:
    assert compares("which quarter is the biggest?") and not compares("which plan has the biggest stop allowance?")
    history = thread("what's the Q1 revenue target?", "Q1: $19.2M [1]", "and Q2?", "Q2: $20.4M [1]")
    rewrite = condense_offline("which quarter is the biggest?", history)
    assert "revenue" in rewrite and "target" in rewrite
    assert "q1" not in rewrite.lower() and "q2" not in rewrite.lower()


@pytest.mark.parametrize(
    ("question", "kind"),
    [("and then what?", "then"), ("what's next?", "then"), ("and if I don't?", "otherwise"), ("and why?", "")],
)
def test_what_next_kinds(question: str, kind: str) -> None:
    assert what_next_kind(question) == kind


@pytest.mark.parametrize(
    ("question", "previous", "something_else"),
    [
        ("and for contractors?", "how many vacation days do employees get?", True),
        ("what about tier 4?", "what's the nightly hotel cap in tier 2 cities?", True),
        ("and if I don't?", "How long do I have to acknowledge a page?", True),
        ("and who led it?", "how much did we raise in the series A?", False),  # about the same thing
        ("what about after five years?", "How many vacation days do I get a year?", False),  # a condition
        ("do they need a card for it?", "how long is the free trial?", False),  # no connective
    ],
)
def test_what_asks_for_something_else(question: str, previous: str, something_else: bool) -> None:
    assert asks_for_something_else(question, [Turn("user", previous)]) is something_else


# --- the shapes Slack threads take (session 7): each rewrite is what a person would have typed alone -------------


@pytest.mark.parametrize(
    ("follow_up", "previous", "expected"),
    [
        # It was "who led it (raise series)": the pronoun is the thing the previous question asked about.
        ("and who led it?", "how much did we raise in the series A?", "who led the series A?"),
        ("is that per year?", "what's the learning budget?", "is the learning budget per year?"),
        (
            "can I just answer it myself?",
            "who should handle an email from an investor?",
            "can I just answer an email from an investor myself?",
        ),
        # "they" wants a plural: the free trial is "it", the customers stay "they".
        ("do they need a card for it?", "how long is the free trial?", "do they need a card for the free trial?"),
        ("how do I do that?", "can I carry over vacation days?", "how do I carry over vacation days?"),
    ],
)
def test_a_pronoun_stands_for_the_previous_questions_thing(follow_up: str, previous: str, expected: str) -> None:
    assert condensed(follow_up, previous) == expected


def test_that_before_a_noun_is_a_determiner_not_a_pronoun() -> None:
    rewrite = condensed("does that plan include SSO?", "what's the cheapest plan?")
    assert rewrite.startswith("does that plan include SSO")


def test_a_pronoun_can_stand_for_the_name_the_previous_answer_gave() -> None:
    history = thread("who runs payroll?", "Maria Chen runs payroll from the Berlin office. [1]")
    assert condense_offline("what's her email?", history) == "what's Maria Chen's email?"
    tools = thread("which tool do we use for paging?", "We use Klaxon for paging and escalation. [1]")
    assert condense_offline("how do I install it?", tools) == "how do I install Klaxon?"
    # A who-question about a person of its own keeps that person: the thread is about them, not the answer's name.
    about_her = thread("who did Anna Vissi marry?", "She married Nikos Karvelas in 1980. [1]")
    assert "Anna Vissi" in condense_offline("when did she start singing?", about_her)


@pytest.mark.parametrize(
    ("follow_up", "previous", "expected"),
    [
        # It was the previous question with the condition glued on ("how long is paid leave … if I don't use it
        # all"), which asked the amount again and was answered with annual leave.
        (
            "what if I don't use it all in the first year?",
            "how long is paid leave for the secondary caregiver?",
            "What happens to paid leave for the secondary caregiver if I don't use it all in the first year?",
        ),
        # A deadline it does not name: the previous question, under the condition.
        (
            "what if I miss that?",
            "when do I have to submit my bank details as a new hire?",
            "when do I have to submit my bank details as a new hire if I miss that?",
        ),
        (
            "what if I'm remote?",
            "how many days a week do I have to be in the office?",
            "how many days a week do I have to be in the office if I'm remote?",
        ),
        (
            "and if it's over 7,500?",
            "who approves an expense claim of $1,500?",
            "who approves an expense claim if it's over 7,500?",  # the condition's sum replaces the one asked before
        ),
    ],
)
def test_what_if_is_the_previous_question_under_a_condition(follow_up: str, previous: str, expected: str) -> None:
    assert condensed(follow_up, previous) == expected


def test_if_i_dont_carries_what_the_answer_said_must_be_done() -> None:
    # It was "What happens if i don't ack a page?", refused (cosine 0.32): the document's "If not acknowledged
    # within 5 minutes, the secondary on-call is paged" repeats the answer's words, not the question's "ack".
    history = thread(
        "how fast do i have to ack a page?", "When Klaxon pages you, you must acknowledge within 5 minutes. [1]"
    )
    rewrite = condense_offline("and if i don't?", history)
    assert rewrite == "What happens if i don't ack a page? (acknowledge within 5 minutes)"
    assert asks_for_something_else("and if i don't?", history)


@pytest.mark.parametrize(
    ("correction", "previous", "expected"),
    [
        ("no, I meant the EU one", "where is the US data center?", "where is the EU data center?"),
        ("sorry, I meant Berlin", "what's the hotel cap in London?", "what's the hotel cap in Berlin?"),
    ],
)
def test_a_correction_is_the_previous_question_about_the_other_name(
    correction: str, previous: str, expected: str
) -> None:
    assert condensed(correction, previous) == expected
    assert asks_for_something_else(correction, [Turn("user", previous)])


def test_a_bare_group_fills_the_slot_of_the_one_who_gets_it() -> None:
    # It was "contractors (paid parental leave primary caregiver)", answered with the caregiver's 16 weeks.
    assert condensed("what about contractors?", "how much paid parental leave does the primary caregiver get?") == (
        "how much paid parental leave do contractors get?"
    )
    # "I" is no slot to fill: the thread's words are carried instead.
    assert condensed("and interns?", "how long do I have to finish onboarding?").startswith("interns (")


def test_a_bare_thing_of_the_same_kind_fills_the_counted_slot() -> None:
    assert (
        condensed("and sick days?", "how many vacation days do I get a year?") == "how many sick days do I get a year?"
    )
    assert condensed("and sick days?", "how many vacation days do I get a year?") != "sick days (vacation year)"


def test_the_other_one_is_the_name_the_answer_gave_besides_the_one_asked() -> None:
    history = thread(
        "how much is the Starter plan?", "Starter: $29 per vehicle per month. [1] Growth: $59 per vehicle. [1]"
    )
    assert condense_offline("what about the other plan?", history) == "how much is the Growth plan?"
    assert asks_for_something_else("what about the other plan?", history)


def test_a_new_question_in_a_thread_is_not_glued_to_the_old_one() -> None:
    history = thread(
        "how many vacation days do I get?", "Full-time employees receive 25 days of paid annual leave. [1]"
    )
    assert condense_offline("what's the parental leave policy?", history) == "what's the parental leave policy?"
    assert condense_offline("and how do I book a meeting room?", history) == "how do I book a meeting room?"
    # A question of its own is not the previous one with a word swapped ("how much happens to cancel an annual
    # plan?" was the rewrite of this one).
    rewrite = condensed("what happens to their data after they cancel?", "how much notice to cancel an annual plan?")
    assert rewrite.startswith("what happens to their data after they cancel")


@pytest.mark.parametrize(
    ("follow_up", "previous", "kept"),
    [
        ("who do I ask?", "how do I get a new laptop?", ["laptop"]),
        ("and the deadline?", "how do I submit an expense report?", ["deadline", "expense"]),
        ("does that apply to interns too?", "do employees get a learning budget?", ["interns", "learning budget"]),
        ("那实习生呢？", "正式员工每年有几天年假？", ["年假", "实习生"]),
        ("如果没有呢？", "请病假需要病假条吗？", ["病假条", "如果没有"]),
    ],
)
def test_short_follow_ups_keep_the_threads_words(follow_up: str, previous: str, kept: list[str]) -> None:
    rewrite = condensed(follow_up, previous)
    assert all(word in rewrite for word in kept), rewrite
