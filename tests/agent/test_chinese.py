"""Chinese questions (issue #13, Build 5), offline, on small made-up Chinese documents (not the sample KBs).

- Words are read as the documents write them: jieba's guessed words ("哪张卡" → 张卡) do not refuse a
  question, and characters the documents write as one word (年 假 → 年假) count as that word.
- A near-miss office is refused: a city the documents name only in the hotel limits has no office rules,
  and a thing no document mentions (健身补贴) is not the allowance they do describe.
- A rule next to a neighbouring rule: the hotel limit of the city asked about leads, not the meal allowance
  of the passage ranked above it; a sentence that only points to another document does not lead.
- Follow-ups: 那…呢 replaces the previous question's thing (婚假 → 陪产假, a place by a place); one with a
  question of its own (丢了怎么办, 当天往返的呢) keeps the previous question's subject; "如果没到呢？" asks what
  happens otherwise, and is not answered with the sentence the thread was just told.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.settings import build_settings

from bot.agent.condense import condense_offline, is_follow_up, what_next_kind
from bot.agent.models import Turn
from tools.text import cjk_content_words, cjk_nouns, cjk_words

TRAVEL = """# 广州办公室差旅与报销规定

*适用范围：星禾文具（广州）有限公司全体员工*

## 住宿标准

- 北京、上海、深圳：每晚不超过 **¥550**。
- 其他城市：每晚不超过 **¥380**。

## 出差补贴

出差期间每天发放伙食补贴 ¥120，无需提供发票。当天往返的，补贴为 ¥60。

## 报销到账

报销款在审批通过后 7 个工作日内打入员工的工资卡。如超过 7 个工作日仍未到账，请联系广州财务专员李娜。

## 加班交通

晚上加班后回家的打车费用，按广州办公室员工手册执行。
"""

HANDBOOK = """# 广州办公室员工手册

## 办公室信息

地址：广州市天河区花城大道 88 号 20 楼。新员工在 20 楼前台领取门禁卡。门禁卡遗失须提交补办申请，补办费用 ¥30。

## 假期

| 假期类型 | 天数 |
|---|---|
| 婚假 | 13 天 |
| 陪产假 | 15 天 |
| 丧假 | 3 天 |

员工每年享有 12 天带薪年假。当年未休完的年假可顺延至次年 3 月 31 日，逾期作废。

## 加班

工作日 22:00 以后下班的，可报销回家的打车费用。
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """An offline engine over one made-up Chinese KB (no sample KB is ingested)."""
    from bot.agent.engine import AnswerEngine
    from tools.service import KnowledgeService

    data_dir: Path = tmp_path_factory.mktemp("chinese") / "data"
    with KnowledgeService(build_settings(data_dir).tools) as service:
        service.create_kb("guangzhou", "广州办公室：差旅、报销、考勤与假期。")
        service.ingest_bytes("guangzhou", "travel-zh.md", TRAVEL.encode())
        service.ingest_bytes("guangzhou", "handbook-zh.md", HANDBOOK.encode())
        yield AnswerEngine(service)


def ask(engine, question: str, history: list[str] = ()):  # type: ignore[assignment]
    """Ask `question` after the earlier questions of `history`, keeping the bot's own answers as the thread."""
    turns: list[Turn] = []
    for earlier in history:
        reply = engine.answer(earlier, turns, kb="guangzhou")
        turns += [Turn("user", earlier), Turn("assistant", reply.answer)]
    return engine.answer(question, turns, kb="guangzhou")


# --- words as the documents write them ------------------------------------------------------------


def test_a_measure_word_glued_to_a_noun_does_not_refuse_the_question(engine):
    # jieba's HMM reads 哪张卡 as a person's name "张卡", which no document mentions.
    answer = ask(engine, "报销款打到哪张卡")
    assert answer.status == "answered", answer.answer
    assert "工资卡" in answer.answer


def test_characters_the_documents_write_as_one_word_count_as_it(engine):
    # 年假 is 年 + 假 to jieba's dictionary; the handbook writes 年假.
    answer = ask(engine, "没休完的年假可以留到明年吗")
    assert answer.status == "answered", answer.answer
    assert "3 月 31 日" in answer.answer.split("[1]")[0]


def test_question_words_are_read_with_the_kb():
    known = {"年假"}.__contains__
    assert ("年假", "n") in cjk_words("没休完的年假可以留到明年吗", known)
    assert "年假" not in [w for w, _ in cjk_words("没休完的年假可以留到明年吗")]  # without the KB: characters
    assert "张卡" not in cjk_nouns("报销款打到哪张卡")
    assert "卡里" not in cjk_content_words("什么时候充到卡里", lambda w: False)  # in the card, not a name
    assert cjk_nouns("广州办公室的健身补贴是多少")[-2:] == ["健身", "补贴"]  # 健身 qualifies the allowance
    assert "回来" not in cjk_nouns("请假回来材料什么时候交")  # a verb before its object qualifies nothing
    assert cjk_nouns("午休多长时间") == ["午休"]  # 多长时间 asks, though jieba tags it a noun
    assert "有没有" not in cjk_nouns("广州办公室有没有丧假")


# --- near misses ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "北京办公室的年假有几天？",  # 北京 is only in the hotel limits: no office rules of its own
        "深圳办公室在哪里",
        "成都办公室的婚假几天",  # no document names 成都 at all
        "广州办公室的健身补贴是多少",  # no document mentions a gym allowance, though 补贴 is everywhere
        "广州办公室的VPN怎么申请",  # a Latin name no document writes
    ],
)
def test_a_near_miss_office_or_allowance_is_refused(engine, question):
    answer = ask(engine, question)
    assert answer.status == "insufficient_context", answer.answer


def test_a_chinese_refusal_says_what_the_documents_never_mention(engine):
    answer = ask(engine, "北京办公室的年假有几天？")
    assert answer.status == "insufficient_context"
    assert "没有提到“北京办公室”" in answer.answer


def test_a_yes_no_question_form_is_not_a_missing_thing(engine):
    # 有没有 ("is there") is how the question is asked; jieba tags it a verb before the noun it asks about.
    answer = ask(engine, "广州办公室有没有丧假")
    assert answer.status == "answered", [r.reason for r in answer.rounds]
    assert "3 天" in answer.answer


def test_the_documented_office_is_answered(engine):
    answer = ask(engine, "广州办公室的地址是什么")
    assert answer.status == "answered", answer.answer
    assert "花城大道" in answer.answer


# --- the rule asked about, not its neighbour ------------------------------------------------------


def test_hotel_limit_of_the_city_asked_leads_not_the_meal_allowance(engine):
    answer = ask(engine, "去深圳出差住宿一晚最多报多少")
    assert answer.status == "answered", [r.reason for r in answer.rounds]
    lead = answer.answer.split("[1]")[0]
    assert "¥550" in lead and "伙食" not in lead


def test_a_sentence_that_only_points_elsewhere_does_not_lead(engine):
    answer = ask(engine, "晚上加班打车回家能报销吗")
    assert answer.status == "answered", answer.answer
    assert "22:00" in answer.answer.split("[1]")[0]
    assert answer.citations[0].document == "handbook-zh.md"


def test_whom_to_contact_is_answered_with_the_contact(engine):
    answer = ask(engine, "报销款一直没到账该找谁")
    assert answer.status == "answered", answer.answer
    assert "李娜" in answer.answer


# --- follow-ups ----------------------------------------------------------------------------------


def test_na_ne_follow_up_asks_the_same_question_about_the_new_thing(engine):
    answer = ask(engine, "那陪产假呢？", ["婚假有几天？"])
    assert answer.status == "answered", answer.answer
    assert answer.standalone_query == "陪产假有几天"
    assert "15 天" in answer.answer.split("[1]")[0]


def test_na_ne_follow_up_about_an_undocumented_office_is_refused(engine):
    answer = ask(engine, "那北京办公室呢？", ["广州办公室每年有几天年假？"])
    assert answer.standalone_query.startswith("北京办公室")
    assert answer.status == "insufficient_context", answer.answer


def test_follow_up_with_its_own_question_keeps_the_subject(engine):
    answer = ask(engine, "当天往返的呢？", ["出差补贴每天多少？"])
    assert answer.status == "answered", answer.answer
    assert "¥60" in answer.answer
    answer = ask(engine, "丢了怎么办", ["门禁卡在哪里领？"])
    assert answer.status == "answered", answer.answer
    assert "¥30" in answer.answer


def test_what_if_not_follow_up_is_answered_with_what_happens_then(engine):
    # "如果没到呢？" after "报销款多久到账？": not the 7 working days again, but whom to contact after them.
    answer = ask(engine, "如果没到呢？", ["报销款多久到账？"])
    assert answer.status == "answered", answer.answer
    assert "李娜" in answer.answer.split("[1]")[0]


def test_chinese_follow_up_shapes():
    history = [Turn("user", "午餐补贴每天多少钱？"), Turn("assistant", "午餐补贴：每个工作日 ¥30。[1]")]
    assert is_follow_up("什么时候充到卡里？")  # no subject noun of its own
    assert is_follow_up("如果超过90天呢？")
    assert not is_follow_up("广州办公室的地址是什么")
    # its own question word: the previous question's subject, not its "how much"
    assert condense_offline("什么时候充到卡里？", history) == "午餐补贴每天 什么时候充到卡里"
    assert condense_offline("那其他城市呢？", [Turn("user", "上海出差住酒店一晚最多能报多少？")]).startswith("上海")
    assert what_next_kind("如果没到呢？") == what_next_kind("超出了怎么办？") == "otherwise"
    assert what_next_kind("然后呢？") == "then"
    assert what_next_kind("那陪产假呢？") == ""  # the same question about another thing
