"""Who may read what, decided once in the application layer: origins, restricted KBs, DMs, defaults."""

from __future__ import annotations

import pytest
from helpers.membership import StaticMembership

from bot.core import KnowledgeBot, NotFound, Origin

FINANCE_QUESTION = "What's the revenue target for Q3 of FY2027?"
EMPLOYEE, CFO = "U0EMPLOY01", "U0CFO00001"


def documents(answer) -> list[str]:
    return [c.document for c in answer.citations]


def finance_untouched(answer) -> bool:
    return (
        "finance" not in answer.searched_kbs
        and "finance" not in answer.route.kbs
        and "finance" not in answer.route.scores
        and all("finance" not in r.kbs for r in answer.rounds)
        and all(not eid.startswith("finance/") for r in answer.rounds for eid in r.evidence_ids)
        and all(c.kb != "finance" for c in answer.citations)
        and "21.6" not in answer.answer
    )


def test_restricted_kb_is_never_searched_or_cited_outside_its_channel(kbbot):
    answer = kbbot.ask(Origin.slack_channel("C0PEOPLE01", EMPLOYEE), FINANCE_QUESTION).answer
    assert finance_untouched(answer)


def test_pinning_a_restricted_kb_outside_its_channel_searches_nothing(kbbot):
    answer = kbbot.ask(Origin.slack_channel("C0PEOPLE01", EMPLOYEE), FINANCE_QUESTION, kb="finance").answer
    assert answer.status == "insufficient_context"
    assert answer.searched_kbs == [] and answer.citations == [] and finance_untouched(answer)


def test_restricted_kb_is_searched_and_cited_in_its_channel(kbbot):
    answer = kbbot.ask(Origin.slack_channel("C0FINANCE1", CFO), FINANCE_QUESTION).answer
    assert answer.status == "answered", answer.answer
    assert answer.rounds[0].kbs == ["finance"]
    assert "revenue-targets-fy2027.md" in documents(answer) and "$21.6M" in answer.answer


def test_restricted_kb_in_a_dm_follows_the_users_channels(kbbot, membership):
    member = kbbot.ask(Origin.slack_dm("D0DIRECT1", CFO), FINANCE_QUESTION).answer
    assert "finance" in member.searched_kbs and any(c.kb == "finance" for c in member.citations)
    outsider = kbbot.ask(Origin.slack_dm("D0DIRECT2", EMPLOYEE), FINANCE_QUESTION).answer
    assert finance_untouched(outsider)
    assert (EMPLOYEE, frozenset({"C0FINANCE1"})) in membership.asked


def test_a_dm_is_a_dm_whatever_its_channel_id(kbbot):
    answer = kbbot.ask(Origin.slack_dm("", EMPLOYEE), FINANCE_QUESTION).answer
    assert finance_untouched(answer)


def test_a_failed_membership_lookup_fails_closed(core_settings):
    with KnowledgeBot(core_settings, membership=StaticMembership({"C0FINANCE1": {CFO}}, fail=True)) as bot:
        answer = bot.ask(Origin.slack_dm("D0DIRECT1", CFO), FINANCE_QUESTION).answer
        assert finance_untouched(answer)
        assert "finance" not in {v.name for v in bot.visible_kbs(Origin.slack_dm("D0DIRECT1", CFO))}


def test_channel_default_kbs_are_tried_first(kbbot):
    question = "How long is an OAuth access token valid for the API?"
    in_product = kbbot.ask(Origin.slack_channel("C0PRODUCT1", EMPLOYEE), question).answer
    assert in_product.rounds[0].kbs == ["product"]
    assert list(in_product.route.scores) == ["product"], "only the channel's KB is probed first"
    assert in_product.status == "answered" and len(in_product.rounds) == 1

    in_engineering = kbbot.ask(Origin.slack_channel("C0ENG00001", EMPLOYEE), question).answer
    assert in_engineering.rounds[0].kbs == ["engineering"]
    # Engineering can't answer it, so a later round widens to the other public KBs — never to finance.
    assert len(in_engineering.rounds) >= 2 and "product" in in_engineering.rounds[1].kbs
    assert "finance" not in in_engineering.searched_kbs
    assert in_engineering.status == "answered" and "api-reference.pdf" in documents(in_engineering)


def test_lists_show_only_what_the_origin_may_read(kbbot):
    assert "finance" not in {v.name for v in kbbot.visible_kbs(Origin.slack_channel("C0PEOPLE01", EMPLOYEE))}
    assert "finance" in {v.name for v in kbbot.visible_kbs(Origin.slack_channel("C0FINANCE1", CFO))}
    assert {v.name for v in kbbot.visible_kbs(Origin.cli())} == {"engineering", "finance", "people", "product"}


def test_the_command_line_is_told_about_an_unknown_kb(kbbot):
    with pytest.raises(NotFound, match="no knowledge base named 'nope'"):
        kbbot.ask(Origin.cli(), FINANCE_QUESTION, kb="nope")


def test_an_eval_origin_reads_only_its_kbs(kbbot):
    answer = kbbot.ask(Origin.eval({"people"}), FINANCE_QUESTION).answer
    assert set(answer.searched_kbs) <= {"people"} and finance_untouched(answer)


# --- the assistant pane: a DM-like thread, with the channel the user is looking at ----------------------------


def test_the_assistant_pane_reads_the_viewed_channels_restricted_kb_only_for_its_members(kbbot):
    member = Origin.slack_assistant("D0DIRECT1", CFO, "1.000001", context_channel="C0FINANCE1")
    assert kbbot.searched_first(member) == ["finance"]
    answer = kbbot.ask(member, FINANCE_QUESTION).answer
    assert answer.rounds[0].kbs == ["finance"] and any(c.kb == "finance" for c in answer.citations)

    # Looking at the finance channel grants nothing by itself: the employee is not a member of it.
    outsider = Origin.slack_assistant("D0DIRECT2", EMPLOYEE, "1.000002", context_channel="C0FINANCE1")
    assert kbbot.searched_first(outsider) == []
    assert "finance" not in {v.name for v in kbbot.visible_kbs(outsider)}
    assert finance_untouched(kbbot.ask(outsider, FINANCE_QUESTION).answer)


def test_the_assistant_pane_searches_the_viewed_channels_kbs_first(kbbot):
    question = "How long is an OAuth access token valid for the API?"
    origin = Origin.slack_assistant("D0DIRECT2", EMPLOYEE, "1.000003", context_channel="C0PRODUCT1")
    assert kbbot.searched_first(origin) == ["product"]
    answer = kbbot.ask(origin, question).answer
    assert answer.rounds[0].kbs == ["product"] and list(answer.route.scores) == ["product"]
    # no channel in view: nothing is searched first, and the DM rules apply
    assert kbbot.searched_first(Origin.slack_assistant("D0DIRECT2", EMPLOYEE, "1.000004")) == []


def test_the_assistant_pane_fails_closed_when_membership_cannot_be_checked(core_settings):
    with KnowledgeBot(core_settings, membership=StaticMembership({"C0FINANCE1": {CFO}}, fail=True)) as bot:
        origin = Origin.slack_assistant("D0DIRECT1", CFO, "1.000005", context_channel="C0FINANCE1")
        assert bot.searched_first(origin) == []
        assert "finance" not in {v.name for v in bot.visible_kbs(origin)}
        assert finance_untouched(bot.ask(origin, FINANCE_QUESTION).answer)
