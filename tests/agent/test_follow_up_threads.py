"""Follow-ups asked in turn in one thread on the sample KBs, with the bot's real answers as the history and the
real word similarity: the condensed query is the question a person would have typed alone, and it finds the fact."""

from __future__ import annotations

from bot.agent.models import Turn


def asked_in_turn(engine, *questions: str):
    """Each question asked in turn in one thread, with the bot's real answers as its history."""
    history: list[Turn] = []
    for question in questions[:-1]:
        history += [Turn("user", question), Turn("assistant", engine.answer(question, history).answer)]
    return history, engine.answer(questions[-1], history)


def test_what_about_a_group_asks_the_same_question_for_that_group(offline_engine) -> None:
    # It was "contractors (paid parental leave primary caregiver)", answered with a sentence that has no figure.
    _, answer = asked_in_turn(
        offline_engine, "how much paid parental leave does the primary caregiver get?", "what about contractors?"
    )
    assert answer.standalone_query == "how much paid parental leave do contractors get?"
    assert answer.status == "answered"
    assert "12 weeks" in answer.answer, answer.answer


def test_a_bare_thing_of_the_counted_kind_is_counted_instead(offline_engine) -> None:
    # It was "vehicles (max stops one optimization plan)"; "contractors" are not of the kind days are.
    stops = [Turn("user", "max stops in one optimization plan?"), Turn("assistant", "Up to 2,000 stops. [1]")]
    assert offline_engine.standalone_query("and vehicles?", stops) == "max vehicles in one optimization plan?"
    days = [Turn("user", "how many vacation days do I get?"), Turn("assistant", "25 days a year. [1]")]
    assert "how many contractors" not in offline_engine.standalone_query("and contractors?", days)


def test_if_i_dont_finds_what_follows_when_the_answer_said_what_must_be_done(offline_engine) -> None:
    # Refused at cosine 0.32: "ack" is not the document's word; the answer's "acknowledge within 5 minutes" is.
    history, answer = asked_in_turn(offline_engine, "how fast do i have to ack a page?", "and if i don't?")
    assert "acknowledge within 5 minutes" in answer.standalone_query
    assert answer.status == "answered"
    assert "secondary on-call" in answer.answer, answer.answer


def test_a_condition_that_repeats_a_word_of_the_question_swaps_none_of_its_words(offline_engine) -> None:
    # It was "when do approved expenses get approved out?": "approved", which the question had said already, was
    # taken for the word that replaces "paid".
    history = [
        Turn("user", "when do approved expenses get paid out?"),
        Turn("assistant", "Claims approved by the 20th of a month are paid with that month's payroll. [1]"),
    ]
    assert offline_engine.standalone_query("and if it's approved on the 25th?", history) == (
        "when do approved expenses get paid out if it's approved on the 25th?"
    )


def test_a_swapped_word_takes_its_modifier_along(offline_engine) -> None:
    # It was "what revenue does the base scenario of the plan assume?": "scenario" replaced "case", "base" stayed.
    history = [
        Turn("user", "what revenue does the base case of the plan assume?"),
        Turn("assistant", "Scenario: Base (this plan); Revenue: $84.5M [1]"),
    ]
    assert offline_engine.standalone_query("and in the upside scenario?", history) == (
        "what revenue does the upside scenario of the plan assume?"
    )
    # A question of its own keeps the previous words: "take" in "take time off" is no modifier of "time".
    days = [Turn("user", "do contractors get paid sick days?"), Turn("assistant", "No paid sick days. [1]")]
    assert "paid take time" not in offline_engine.standalone_query("so how do they take time off then?", days)
