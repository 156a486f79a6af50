"""Which KBs a channel searches first: kb.toml's `channels` combined with the changes made from Slack, decided
in `permissions`, stored by `ChannelSetup`; a table that cannot be read leaves the kb.toml defaults and no
auto-reply."""

from __future__ import annotations

import pytest

from bot.core import AccessDenied, KnowledgeBaseError, Origin, permissions
from bot.core.channel_setup import ChannelSetup

PEOPLE, ENG, FINANCE = "C0PEOPLE01", "C0ENG00001", "C0FINANCE1"
EMPLOYEE, ADMIN = "U0EMPLOY01", "U0ADMIN001"


def test_searched_first_is_kb_toml_as_changed_from_slack(kbbot):
    entries = kbbot.service.catalog()
    in_people = Origin.slack_channel(PEOPLE, EMPLOYEE)
    assert permissions.searched_first(in_people, entries) == ["people"]
    assert permissions.searched_first(in_people, entries, {"engineering": True}) == ["engineering", "people"]
    assert permissions.searched_first(in_people, entries, {"people": False}) == []
    pane = Origin.slack_assistant("D0EMPLOY01", EMPLOYEE, context_channel=ENG)
    assert permissions.searched_first(pane, entries, {"product": True}) == ["engineering", "product"]
    assert permissions.first_channels(entries["people"]) == (PEOPLE,)
    assert permissions.first_channels(entries["people"], {PEOPLE: False, ENG: True, "C0OTHER001": False}) == (ENG,)
    assert not permissions.may_be_searched_in(PEOPLE, entries["finance"])
    assert permissions.may_be_searched_in(FINANCE, entries["finance"])
    assert permissions.may_be_searched_in(PEOPLE, entries["engineering"])


def test_changes_are_stored_and_read_back(tmp_path):
    store = ChannelSetup(tmp_path / "records.sqlite3")
    store.set_searched_first(PEOPLE, "engineering", True, ADMIN)
    store.set_searched_first(PEOPLE, "engineering", False, ADMIN)  # the latest change wins
    store.set_autoreply(PEOPLE, True, ADMIN)
    store.close()
    again = ChannelSetup(tmp_path / "records.sqlite3")
    [change] = again.changes(PEOPLE)
    assert (change.kb, change.searched_first, change.changed_by) == ("engineering", False, ADMIN)
    assert again.autoreply(PEOPLE) and not again.autoreply(ENG)
    assert again.changes(ENG) == []


@pytest.fixture
def unreadable_setup(kbbot, tmp_path):
    """The channel table where no database can be opened (a directory), for the length of one test."""
    kept = kbbot.channel_setup
    kbbot.channel_setup = ChannelSetup(tmp_path)
    yield kbbot
    kbbot.channel_setup = kept


def test_an_unreadable_table_means_kb_toml_defaults_and_no_auto_reply(unreadable_setup):
    kbbot = unreadable_setup
    in_people = Origin.slack_channel(PEOPLE, ADMIN)
    assert not kbbot.autoreply_in(PEOPLE)
    assert [kb.name for kb in kbbot.channel_view(in_people).searched_first] == ["people"]
    assert {v.name: v.channels for v in kbbot.visible_kbs(in_people)}["people"] == (PEOPLE,)
    with pytest.raises(KnowledgeBaseError, match="could not be saved"):
        kbbot.set_autoreply(in_people, True)
    with pytest.raises(KnowledgeBaseError, match="could not be saved"):
        kbbot.set_searched_first(in_people, "engineering", True)


def test_channels_are_set_up_from_a_channel_only(kbbot):
    with pytest.raises(AccessDenied):
        kbbot.set_autoreply(Origin.slack_dm("D0ADMIN001", ADMIN), True)
    with pytest.raises(AccessDenied):
        kbbot.channel_view(Origin.cli())


def test_silent_refusals_are_not_recorded(kbbot):
    origin = Origin.slack_channel("C0QUIET001", EMPLOYEE, "1.000001")
    refused = kbbot.ask(origin, "What is the Q3 FY2027 revenue target?", silent_refusals=True)
    assert refused.answer.status == "insufficient_context" and refused.answer_id is None
    assert not kbbot.records.answers_in("C0QUIET001", "1.000001")
    answered = kbbot.ask(origin, "How many vacation days do full-time staff get per year?", silent_refusals=True)
    assert answered.answer.status == "answered" and answered.answer_id is not None
    assert [r["answer_id"] for r in kbbot.records.answers_in("C0QUIET001", "1.000001")] == [answered.answer_id]
