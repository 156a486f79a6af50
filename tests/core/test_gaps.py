"""Knowledge gaps, decided once in the application layer: grouping, who sees which KB's gaps, the index."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from helpers.membership import StaticMembership
from helpers.settings import build_settings

from bot.agent.models import Answer, Citation, Route
from bot.core import AccessDenied, KnowledgeBaseError, KnowledgeBot, NotFound, Origin
from bot.core.gaps import gap_key
from bot.core.records import Records

EMPLOYEE, HR_LEAD, CFO, ADMIN = "U0EMPLOY01", "U0HRLEAD01", "U0CFO00001", "U0ADMIN001"


def answer(question: str, kbs: list[str], answered: bool = False, cited: list[str] | None = None) -> Answer:
    citations = [
        Citation(i + 1, kb, "doc.md", f"{kb}/doc.md@v1#0", "…", 0.5, "doc.md") for i, kb in enumerate(cited or [])
    ]
    return Answer(
        "answered" if answered else "insufficient_context",
        "…",
        question,
        question,
        Route(kbs, {k: 0.5 for k in kbs}),
        [],
        citations,
        {},
        searched_kbs=kbs,
    )


def test_the_same_question_in_other_words_has_one_key():
    assert gap_key("How many vacation days do we get?") == gap_key("vacation days: how many do we get")
    assert gap_key("How many vacation days do we get?") == gap_key("VACATION DAY?")
    assert gap_key("How many vacation days do we get?") != gap_key("How many sick days do we get?")
    assert gap_key("what is it?") == "is it what"  # only stop words: keyed on all of them, not on nothing
    assert gap_key("报销政策是什么") == gap_key("报销政策是什么？")


def test_the_gaps_query_reads_the_kb_time_index_over_10k_answers(tmp_path):
    records = Records(tmp_path / "records.sqlite3")
    kbs = ["people", "engineering", "product", "finance"]
    origin = Origin.slack_channel("C0PEOPLE01", EMPLOYEE)
    ids = []
    for i in range(10_000):
        kb = kbs[i % 4]
        refused = i % 3 == 0
        ids.append(records.log_answer(origin, answer(f"where is topic {i % 50} of {kb}?", [kb], not refused, [kb])))
    for i in range(1, 10_000, 7):
        records.log_feedback(ids[i], "bad", Origin.slack_channel("C0PEOPLE01", f"U{i % 5}"))
    plan = records.explain_gaps_query(["people", "engineering"], time.time() - 30 * 86400)
    assert any("USING INDEX gap_signals_kb_at" in step and step.startswith("SEARCH gap_signals") for step in plan), plan
    assert not any(step.startswith("SCAN") for step in plan), plan
    rows = records.gap_rows(["people"], 0)
    refused = sum(r.count for r in rows if r.kind == "refused")
    assert refused == sum(1 for i in range(0, 10_000, 4) if i % 3 == 0)
    assert {r.key for r in rows} == {gap_key(f"where is topic {n} of people?") for n in range(0, 50, 2)}
    assert all(r.scope == ("people",) for r in rows)


def test_a_second_thumbs_down_by_one_person_counts_once_and_keeps_its_reason(tmp_path):
    records = Records(tmp_path / "records.sqlite3")
    answer_id = records.log_answer(
        Origin.slack_channel("C1", EMPLOYEE), answer("dress code?", ["people"], True, ["people"])
    )
    someone = Origin.slack_channel("C1", EMPLOYEE)
    records.log_feedback(answer_id, "bad", someone)
    records.log_feedback(answer_id, "bad", someone)
    records.set_feedback_reason(answer_id, someone, "outdated", "changed\x00 in March")
    records.log_feedback(answer_id, "bad", Origin.slack_channel("C1", HR_LEAD))
    [row_outdated, row_plain] = sorted(records.gap_rows(["people"], 0), key=lambda r: r.reason or "~")
    assert (row_outdated.reason, row_outdated.count, row_plain.reason, row_plain.count) == ("outdated", 1, None, 1)
    assert records.feedback_for(answer_id)[-2]["comment"] == "changed in March"
    assert records.gap_comments(["people"], 0) == [(gap_key("dress code?"), ("people",), "changed in March")]


def test_records_written_before_gaps_are_migrated(tmp_path):
    path = tmp_path / "records.sqlite3"
    old = Records(path)
    answer_id = old.log_answer(Origin.slack_channel("C1", EMPLOYEE), answer("parking?", ["people"]))
    old.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE gap_signals")
    db.execute("ALTER TABLE feedback DROP COLUMN comment")
    db.execute(
        "INSERT INTO feedback (at, answer_id, value, user) VALUES (?, ?, 'bad', ?)", (time.time(), answer_id, HR_LEAD)
    )
    db.commit()
    db.close()
    rows = Records(path).gap_rows(["people"], 0)
    assert sorted((r.kind, r.count) for r in rows) == [("disliked", 1), ("refused", 1)]


# --- who sees which gaps (the façade) ----------------------------------------------------------------


@pytest.fixture
def gaps_bot(synced_data_dir, tmp_path):
    import shutil

    data_dir = tmp_path / "data"
    shutil.copytree(synced_data_dir, data_dir)
    membership = StaticMembership({"C0FINANCE1": {CFO}, "C0PEOPLE01": {EMPLOYEE, HR_LEAD}})
    bot = KnowledgeBot(build_settings(data_dir, KBBOT_ADMIN_USERS=ADMIN), membership=membership)
    origin = Origin.slack_channel("C0PEOPLE01", EMPLOYEE)
    for _ in range(3):
        bot.records.log_answer(origin, answer("How many vacation days do contractors get?", ["people"]))
    bot.records.log_answer(origin, answer("vacation days for contractors?", ["people"]))
    bot.records.log_answer(origin, answer("How do I page the on-call?", ["engineering"]))
    finance = Origin.slack_channel("C0FINANCE1", CFO)
    bot.records.log_answer(finance, answer("What is the Q4 burn multiple?", ["finance", "people"]))
    disliked = bot.records.log_answer(finance, answer("Who approves a $2M spend?", ["finance"], True, ["finance"]))
    bot.record_feedback(finance, disliked, "bad")
    bot.record_feedback_reason(finance, disliked, "wrong", "it is the board")
    yield bot, membership
    bot.close()


def questions(report) -> list[str]:
    return [g.question for g in report.gaps]


def test_the_command_line_sees_every_gap_most_frequent_first(gaps_bot):
    bot, _ = gaps_bot
    report = bot.knowledge_gaps(Origin.cli())
    assert report.gaps[0].count == 4 and report.gaps[0].refused == 4
    assert report.gaps[0].question == "vacation days for contractors?"  # the latest wording
    [wrong] = [g for g in report.gaps if "spend" in g.question]
    assert wrong.disliked == 1 and wrong.reasons == {"wrong": 1} and wrong.comments == ("it is the board",)
    assert bot.knowledge_gaps(Origin.cli(), kb="engineering").kbs == ("engineering",)
    assert questions(bot.knowledge_gaps(Origin.cli(), kb="engineering")) == ["How do I page the on-call?"]
    assert bot.knowledge_gaps(Origin.cli(), days=1).total == report.total
    with pytest.raises(NotFound):
        bot.knowledge_gaps(Origin.cli(), kb="nope")
    with pytest.raises(KnowledgeBaseError):
        bot.knowledge_gaps(Origin.cli(), days=0)


def test_a_reader_sees_no_gaps(gaps_bot):
    bot, _ = gaps_bot
    home = bot.home(Origin.slack_home(EMPLOYEE))
    assert home.gaps is None and not any(kb.may_upload for kb in home.kbs)
    assert "finance" not in [kb.name for kb in home.kbs]
    assert bot.knowledge_gaps(Origin.slack_home(EMPLOYEE)).gaps == ()
    with pytest.raises(AccessDenied):
        bot.knowledge_gaps(Origin.slack_home(EMPLOYEE), kb="people")
    with pytest.raises(NotFound):  # a restricted KB it cannot read does not exist for it
        bot.knowledge_gaps(Origin.slack_home(EMPLOYEE), kb="finance")


def test_an_uploader_sees_only_their_kbs_gaps_and_none_that_touch_a_kb_they_cannot_read(gaps_bot):
    bot, _ = gaps_bot
    home = bot.home(Origin.slack_home(HR_LEAD))
    assert [kb.name for kb in home.kbs if kb.may_upload] == ["people"]
    assert home.gaps.kbs == ("people",)
    assert questions(home.gaps) == ["vacation days for contractors?"]  # not on-call, not the finance-scoped one


def test_a_restricted_kbs_gaps_go_to_its_uploaders_who_can_read_it(gaps_bot):
    bot, membership = gaps_bot
    cfo = bot.home(Origin.slack_home(CFO))
    assert "finance" in [kb.name for kb in cfo.kbs]
    assert set(questions(cfo.gaps)) == {"What is the Q4 burn multiple?", "Who approves a $2M spend?"}
    admin = bot.home(Origin.slack_home(ADMIN))  # may change every KB, but is not in the finance channel
    assert "finance" not in [kb.name for kb in admin.kbs] and "finance" not in admin.gaps.kbs
    assert not {"What is the Q4 burn multiple?", "Who approves a $2M spend?"} & set(questions(admin.gaps))
    with pytest.raises(NotFound):
        bot.knowledge_gaps(Origin.slack_home(ADMIN), kb="finance")
    membership.fail = True
    try:
        closed = bot.home(Origin.slack_home(CFO))
    finally:
        membership.fail = False
    assert "finance" not in [kb.name for kb in closed.kbs] and closed.note and "could not be checked" in closed.note
    assert closed.gaps is None  # the CFO uploads to finance only: no gaps to see without it


def test_feedback_reasons_are_checked(gaps_bot):
    bot, _ = gaps_bot
    origin = Origin.slack_channel("C0PEOPLE01", EMPLOYEE)
    with pytest.raises(KnowledgeBaseError):
        bot.record_feedback_reason(origin, "a1", "rm -rf", None)
    bot.record_feedback_reason(origin, "a1", None, "   ")  # nothing given: nothing recorded
    assert bot.records.feedback_for("a1") == []


def test_kbbot_report_prints_the_gaps(gaps_bot, run_cli):
    bot, _ = gaps_bot
    settings = bot.settings
    bot.close()
    result = run_cli(settings, "report", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["days"] == 30 and data["gaps"][0]["count"] == 4 and "finance" in data["kbs"]
    text = run_cli(settings, "report", "--kb", "people")
    assert text.code == 0 and "vacation days for contractors?" in text.out and "refused 4×" in text.out
    assert "on-call" not in text.out and "Knowledge gaps — last 30 days (people)" in text.out
    bad = run_cli(settings, "report", "--kb", "nope")
    assert bad.code == 1 and "no knowledge base named 'nope'" in bad.err
    assert run_cli(settings, "report", "--days", "0").code == 1
