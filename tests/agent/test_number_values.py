"""Numbers written differently in a question and a document (issue #13, Build 2): "two" and "2", "5000" and
"¥5,000", "9k" and "$9,000", "a million" and "$1,000,000" are one value to coverage and to the answer's choice of
sentence; an amount the asker brings ("over 7,500", "超过5000的报销") is placed in the range a rule states, not a
name the documents must write; a number that is part of a name ("the hdhp 5000") must appear as written."""

from __future__ import annotations

from bot.agent.grading import amount_terms, asked_terms, named_numbers
from bot.agent.models import Turn
from tools.text import asked_amount, number_terms, valued_terms


def test_a_number_is_one_value_term_however_it_is_written() -> None:
    assert number_terms("can i get two?") == number_terms("Up to 2 monitors") == {"#2"}
    assert number_terms("单笔超过5000的报销") == number_terms("单笔金额超过 ¥5,000 的报销") == {"#5000"}
    assert number_terms("a 10k budget") == number_terms("$10,000") == {"#10000"}
    million = {"#1000000"}
    assert number_terms("over a million") == number_terms("Above $1,000,000") == number_terms("one million") == million
    assert number_terms("twenty-five days") == {"#25"}
    assert number_terms("$2,000.01 to $7,500") == {"#2000.01", "#7500"}
    # the pieces of a figure are no terms of their own: "5,000" is not "5" and "000"
    assert valued_terms("over $5,000") == {"#5000"}


def test_codes_pronouns_and_page_numbers_are_no_values() -> None:
    assert number_terms("SEV1 on v2 since 4.12.0, the 3rd time: 2xx codes in the 1990s") == set()
    assert "sev1" in valued_terms("is SEV1 paged?"), "a code keeps its digits as written"
    assert number_terms("which one is cheaper?") == set(), "'one' alone is a pronoun"
    assert number_terms("Expenses policy — p. 3") == set(), "a PDF location's page number"


def test_an_amount_the_asker_brings_is_not_a_name() -> None:
    assert named_numbers("how much does lumen put in the hsa if i pick the hdhp 5000?") == ["5000"]
    assert named_numbers("单笔超过5000的报销谁审批") == []
    assert amount_terms("单笔超过5000的报销谁审批") == {"#5000"}
    assert amount_terms("do I need approval for a $700 course?") == {"#700"}
    assert "#7500" in asked_terms("and if it's over 7,500?")
    assert asked_amount("who approves an expense claim of three thousand dollars?") == 3_000


def test_a_follow_up_counting_in_words_is_answered_by_the_row_in_digits(offline_engine) -> None:
    # "Up to 2 monitors" said nothing about "two": the row's "2" was no term, and "one of two standard laptops" led.
    question = "how much can i spend on a monitor?"
    history = [Turn("user", question), Turn("assistant", offline_engine.answer(question).answer)]
    answer = offline_engine.answer("can i get two?", history)
    assert answer.status == "answered"
    assert answer.answer.split("[1]")[0].rstrip().endswith("Up to 2 monitors"), answer.answer


def test_an_amount_in_another_spelling_is_placed_in_the_rule_s_range(offline_engine) -> None:
    # The Shanghai policy writes "超过 ¥5,000": "6000" was a number the KB "never mentions".
    answer = offline_engine.answer("报销超过6000要谁审批")
    assert answer.status == "answered", answer.answer
    assert "¥5,000" in answer.answer.split("[1]")[0] and "总经理" in answer.answer
    # "8k" is held by "Over $7,500", not by the header row or a sentence about payroll.
    answer = offline_engine.answer("who approves an 8k expense claim?")
    assert answer.status == "answered"
    assert "VP Finance" in answer.answer.split("[1]")[0], answer.answer


def test_a_number_in_a_name_must_be_written_as_asked(offline_engine) -> None:
    # The KB writes "$5,000" elsewhere; a plan called "HDHP 5000" it never names.
    answer = offline_engine.answer("what is the deductible of the hdhp 5000 plan?")
    assert answer.status == "insufficient_context"
    assert "5000" in answer.answer


def test_a_scaled_figure_the_documents_write_as_a_name_is_no_amount() -> None:
    # "401k" read as $401,000 is held by "up to $750,000": the life insurance sentence led a 401(k) question.
    from bot.agent import answering
    from tools.search import Evidence
    from tools.store import StoredChunk

    def chunk(document: str, text: str) -> StoredChunk:
        return StoredChunk(f"people/{document}@v1#0", "people", document, 1, 0, document, document, text)

    insurance = chunk("benefits.md", "US employees receive life insurance of 2x annual salary, up to $750,000.")
    retirement = chunk("retirement.md", "Lumen offers a 401(k) plan. The match vests immediately.")
    evidence = [Evidence(insurance, 0.9, 0.6, 3.0), Evidence(retirement, 0.85, 0.55, 2.0)]
    draft = answering.extractive_answer("does the 401k match vest straight away?", evidence, routed=["people"])
    assert draft is not None and draft.citations[0].document == "retirement.md", draft.text
