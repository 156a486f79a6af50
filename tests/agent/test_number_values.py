"""Numbers written differently in a question and a document (issue #13, Build 2): "two" and "2", "5000" and
"¥5,000", "9k" and "$9,000", "a million" and "$1,000,000" are one value to coverage and to the answer's choice of
sentence; an amount the asker brings ("over 7,500", "超过5000的报销") is placed in the range a rule states, not a
name the documents must write; a number that is part of a name ("the hdhp 5000") must appear as written.
Session 14: a Chinese numeral ("九十天", "一百五", "百分之七") is its value too, and a duration is read in the smaller
of two units that convert exactly ("two weeks" is "14 days", "two years" "24 months")."""

from __future__ import annotations

from bot.agent.grading import amount_terms, asked_terms, named_numbers
from bot.agent.models import Turn
from tools.text import asked_amount, number_terms, term_value, valued_terms


def test_a_number_is_one_value_term_however_it_is_written() -> None:
    assert number_terms("can i get two?") == number_terms("Up to 2 monitors") == {"#2"}
    assert number_terms("单笔超过5000的报销") == number_terms("单笔金额超过 ¥5,000 的报销") == {"#5000"}
    assert number_terms("a 10k budget") == number_terms("$10,000") == {"#10000"}
    million = {"#1000000"}
    assert number_terms("over a million") == number_terms("Above $1,000,000") == number_terms("one million") == million
    assert number_terms("twenty-five days") == {"#25", "#25d"}, "a duration is its value and its value in days"
    assert number_terms("$2,000.01 to $7,500") == {"#2000.01", "#7500"}
    # the pieces of a figure are no terms of their own: "5,000" is not "5" and "000"
    assert valued_terms("over $5,000") == {"#5000"}


def test_codes_pronouns_and_page_numbers_are_no_values() -> None:
    assert number_terms("SEV1 on v2 since 4.12.0, the 3rd time: 2xx codes in the 1990s") == set()
    assert "sev1" in valued_terms("is SEV1 paged?"), "a code keeps its digits as written"
    assert number_terms("which one is cheaper?") == set(), "'one' alone is a pronoun"
    assert number_terms("Expenses policy — p. 3") == set(), "a PDF location's page number"


def test_a_number_word_spelled_with_unicode_lookalikes_is_read_not_a_crash() -> None:
    # The patterns match case-insensitively, so "ſix" (a long s) matched as "six" and its value lookup raised KeyError.
    assert "#6" in number_terms("you get ſix days")
    assert number_terms("a thouſand dollars") == number_terms("a thousand dollars")


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


def test_a_chinese_numeral_is_the_value_its_digits_write() -> None:
    assert number_terms("费用过了九十天") == number_terms("超过 90 天的费用") == {"#90", "#90d"}
    assert number_terms("超过五千块") == number_terms("超过 ¥5,000") == {"#5000"}
    assert number_terms("十五天") == number_terms("15 天") == {"#15", "#15d"}
    assert number_terms("两次") == {"#2"} and number_terms("超过一万的报销") == {"#10000"}
    assert number_terms("百分之五十") == number_terms("50%") == {"#50"}
    # said aloud: "一百五" is 150, "两万五" 25,000; "一百零五" is 105
    assert number_terms("一百五") == {"#150"} and number_terms("两万五") == {"#25000"}
    assert number_terms("一百零五元") == {"#105"}
    assert valued_terms("病假五天全薪") == valued_terms("病假5天全薪"), "the numeral is no piece of a word"


def test_a_chinese_numeral_inside_a_word_is_no_number() -> None:
    words = [
        "一些",
        "一般",
        "统一",
        "万一",
        "唯一",
        "之一",
        "一律",
        "一起",
        "一等座",
        "第三",
        "周三",
        "星期五",
        "礼拜一",
        "三月",
        "一、报销",
    ]
    for word in words:
        assert number_terms(word) == set(), word
    # a bare 一 before a measure word is "a day", "once", as the English "a day" and "one" are no number
    assert number_terms("一天") == number_terms("一次") == set()
    assert number_terms("三五天") == set(), "three to five days is no one number"
    # after a word ending in 周 or 期 that is no weekday, the numeral counts
    assert number_terms("假期三天") == number_terms("每周三天") == {"#3", "#3d"}
    assert number_terms("每周两天在家办公") == {"#2", "#2d"}
    assert named_numbers("请假超过三天要谁批") == [], "a Chinese numeral is no name the documents must write"


def test_a_duration_is_read_in_the_smaller_unit_it_converts_to_exactly() -> None:
    assert number_terms("two weeks") == {"#14d"} and "#14d" in number_terms("within 14 days")
    assert "#14d" in number_terms("两周") and "#14d" in number_terms("14 天")
    assert number_terms("two years") == {"#24mo"} and "#24mo" in number_terms("every 24 months")
    assert number_terms("1 hour") == {"#60min"} and "#60min" in number_terms("RTO 60 minutes")
    # no other unit converts: a month is no fixed number of days, a working day no calendar day
    assert not number_terms("three months") & number_terms("90 days")
    assert not number_terms("half a day") & number_terms("4 hours")
    assert "#3d" not in number_terms("3 business days")
    assert "#3d" not in number_terms("子女未满 3 周岁"), "an age"
    # the unit's own word stays a term: "how many weeks' notice" is about "4 weeks' notice"
    assert "week" in valued_terms("4 weeks' notice")
    assert term_value("#14d") is None and term_value("#5000") == 5000


def test_a_question_counting_in_chinese_numerals_is_answered_by_the_rule_in_digits(offline_engine) -> None:
    # "九十天" was two character pairs no document writes; the policy writes "超过 90 天的费用原则上不予报销".
    answer = offline_engine.answer("报销过了九十天还能报吗")
    assert answer.status == "answered", answer.answer
    assert "不予报销" in answer.answer and "90 天" in answer.answer, answer.answer


def test_a_duration_in_another_unit_is_answered_by_the_document_s_unit(offline_engine) -> None:
    # The FAQ writes "up to 14 days in advance"; "two weeks" was "#2", and the "two-person lift" constraint led.
    answer = offline_engine.answer("can customers plan their routes two weeks ahead?")
    assert answer.status == "answered", answer.answer
    assert "14 days" in answer.answer.split("[1]")[0], answer.answer
