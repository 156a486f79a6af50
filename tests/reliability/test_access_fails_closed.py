"""Restricted knowledge never leaks when its declaration breaks, and DM access follows channel membership.

The bot runs over real signed requests (HTTP mode) against the fake Slack, on a private copy of the synced
sample store and of the `knowledge_bases/` folder, so a test can break `finance/kb.toml` the ways operators
do: a typo (`visibility = "Restricted"`), a deleted file, a half-written file, an unmounted folder. Each
time, from a public channel, a non-member's DM and a thread follow-up, the finance KB must not be searched,
cited, listed or named — and its members keep it (the last known rules stay in force).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time

import pytest
from helpers import figures
from helpers.fake_slack import FakeSlack
from helpers.slack_helpers import dm_channel
from helpers.slackbot import running_bot, slack_settings_for

from bot.config import REPO_ROOT
from bot.core import Origin

FINANCE_QUESTION = "What's the revenue target for Q3 of FY2027?"
PUBLIC, FINANCE = "C0PEOPLE01", "C0FINANCE1"
EMPLOYEE, CFO = "U0EMPLOY01", "U0CFO00001"
SECRETS = ("21.6", "revenue-targets", "board-financial-plan", "finance", "U0CFO00001")


def everything_said(fake: FakeSlack) -> str:
    """Every string the bot sent to Slack (messages, streams, ephemerals, responses)."""
    return "\n".join(
        json.dumps(c.params, ensure_ascii=False)
        for c in fake.calls
        if c.method.startswith(("chat.", "views.")) or c.method == "response_url"
    )


def break_typo(kbs):
    path = kbs / "finance" / "kb.toml"
    path.write_text(path.read_text(encoding="utf-8").replace('"restricted"', '"Restricted"'), encoding="utf-8")


def break_deleted(kbs):
    (kbs / "finance" / "kb.toml").unlink()


def break_half_written(kbs):
    path = kbs / "finance" / "kb.toml"
    path.write_bytes(path.read_bytes()[:70])


def break_unmounted(kbs):
    kbs.rename(kbs.with_name("knowledge_bases.unmounted"))


BREAKAGES = {
    "typo": break_typo,
    "deleted": break_deleted,
    "half-written": break_half_written,
    "unmounted": break_unmounted,
}


@pytest.fixture
def setup(synced_data_dir, tmp_path):
    data_dir, kbs = tmp_path / "data", tmp_path / "knowledge_bases"
    shutil.copytree(synced_data_dir, data_dir)
    shutil.copytree(REPO_ROOT / "knowledge_bases", kbs)
    fake = FakeSlack().start()
    fake.members = {FINANCE: [CFO], PUBLIC: [EMPLOYEE]}
    settings = slack_settings_for(data_dir, fake.api_url, KBBOT_KNOWLEDGE_BASES_DIR=kbs)
    yield settings, kbs, fake
    fake.stop()


def ask_everywhere(bot) -> dict[str, str]:
    """The finance question from a public channel, a non-member's DM, a thread follow-up and /kb list;
    then from a member's DM. Returns what each reply said."""
    fake, send = bot.fake, bot.send
    said = {}
    fake.reset()
    fake.members = {FINANCE: [CFO], PUBLIC: [EMPLOYEE]}
    message, _ = send.mention(PUBLIC, EMPLOYEE, FINANCE_QUESTION)
    fake.wait_for(lambda: fake.bot_replies(PUBLIC, message["ts"]), what="channel reply")
    send.message(PUBLIC, EMPLOYEE, "and for Q4?", thread_ts=message["ts"])
    fake.wait_for(lambda: len(fake.bot_replies(PUBLIC, message["ts"])) >= 2, what="thread follow-up reply")
    dm, _ = send.dm(EMPLOYEE, FINANCE_QUESTION)
    fake.wait_for(lambda: fake.bot_replies(dm_channel(EMPLOYEE), dm["ts"]), what="outsider DM reply")
    _, rid, _ = send.command("list", EMPLOYEE, PUBLIC)
    fake.wait_for(lambda: send.responses(rid), what="/kb list")
    bot.settle()
    said["outside"] = everything_said(fake)
    # Asking for it by name gets exactly what a KB that does not exist gets.
    refusals = []
    for name in ("finance", "nosuchkb"):
        _, rid, _ = send.command(f"upload {name}", EMPLOYEE, PUBLIC)
        [response] = fake.wait_for(lambda rid=rid: send.responses(rid), what=f"/kb upload {name}")
        refusals.append(response["text"].replace(name, "NAME"))
    assert refusals[0] == refusals[1], refusals
    fake.reset()
    fake.members = {FINANCE: [CFO], PUBLIC: [EMPLOYEE]}
    member, _ = send.dm(CFO, FINANCE_QUESTION)
    [reply] = fake.wait_for(lambda: fake.bot_replies(dm_channel(CFO), member["ts"]), what="member DM reply")
    said["member"] = everything_said(fake)
    return said


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_a_broken_declaration_keeps_the_last_known_rules(setup, breakage, monkeypatch):
    from bot.core import bot as core

    monkeypatch.setattr(core, "DECLARATIONS_CHECK_S", 0.0)  # every question re-reads the kb.toml files
    settings, kbs, fake = setup
    with running_bot(settings, fake) as bot:
        before = ask_everywhere(bot)  # the declaration is good: the baseline the broken one must match
        assert "21.6" in before["member"] and not [s for s in SECRETS if s in before["outside"]]
        BREAKAGES[breakage](kbs)
        time.sleep(0.01)
        after = ask_everywhere(bot)
        leaked = [s for s in SECRETS if s in after["outside"]]
        assert not leaked, f"{breakage}: {leaked} reached people outside the finance channel"
        assert "21.6" in after["member"], "a member keeps the KB: its last known rules stay in force"
        problems = {v.name: v.note for v in bot.kbbot.visible_kbs(Origin.cli())}
        assert problems["finance"], "the bot read the broken declaration, and the command line is told why"
    figures.add("faults_survived")


def test_a_kb_that_never_had_readable_rules_is_usable_from_the_command_line_only(setup, run_cli):
    """A store from before rules were stored (or a KB whose kb.toml was broken from the start)."""
    settings, kbs, fake = setup
    with sqlite3.connect(settings.data_dir / "registry.sqlite3") as db:
        db.execute("DELETE FROM kb_manifests")
    break_typo(kbs)
    with running_bot(settings, fake) as bot:
        fake.members = {FINANCE: [CFO]}
        message, _ = bot.send.mention(FINANCE, CFO, FINANCE_QUESTION)  # even in its own channel
        fake.wait_for(lambda: fake.bot_replies(FINANCE, message["ts"]), what="reply")
        bot.settle()
        assert "21.6" not in everything_said(fake)
        assert "finance" not in bot.kbbot.records.answers_in(FINANCE, message["ts"])[0]["kbs"]
    listed = run_cli(settings, "kb", "list")
    assert "finance" in listed.out and "Restricted" in listed.out  # named, with the reason, to the operator
    answered = run_cli(settings, "ask", FINANCE_QUESTION, "--kb", "finance", "--json")
    assert answered.code == 0 and json.loads(answered.out)["status"] == "answered"
    figures.add("faults_survived")


def test_dm_access_follows_membership_and_a_failed_lookup_is_not_remembered(setup):
    settings, kbs, fake = setup
    with running_bot(settings, fake) as bot:
        bot.kbbot.membership.ttl_s = 0.5  # the default is a minute: MEMBERSHIP_TTL_S

        members: dict[str, list[str]] = {}

        def cfo_gets_finance(lookup_fails: bool = False) -> bool:
            fake.reset()
            fake.members = dict(members)
            if lookup_fails:
                fake.errors["conversations.members"] = "internal_error"
            message, _ = bot.send.dm(CFO, FINANCE_QUESTION)
            [reply] = fake.wait_for(lambda: fake.bot_replies(dm_channel(CFO), message["ts"]), what="reply")
            return "21.6" in everything_said(fake)

        members[FINANCE] = [CFO]
        assert cfo_gets_finance()
        members[FINANCE] = []  # removed from the channel
        time.sleep(0.6)
        assert not cfo_gets_finance(), "removal takes effect once the membership is looked up again"
        members[FINANCE] = [CFO]
        time.sleep(0.6)
        assert not cfo_gets_finance(lookup_fails=True), "a failed lookup fails closed"
        assert cfo_gets_finance(), "and is not remembered: the next question looks again"
    figures.add("faults_survived")


def test_membership_is_remembered_for_at_most_a_minute():
    from bot.slack.membership import MEMBERSHIP_TTL_S

    assert MEMBERSHIP_TTL_S <= 60


MISTAKES_THAT_PARSE = {
    # the file still parses as TOML; each would once have left the KB public
    "misspelt key": lambda text: text.replace("visibility =", "visiblity ="),
    "visibility line deleted": lambda text: "\n".join(
        line for line in text.splitlines() if not line.startswith("visibility")
    ),
    "cut short after the description": lambda text: text[: text.index("\n", text.index("description")) + 1],
}


@pytest.mark.parametrize("mistake", list(MISTAKES_THAT_PARSE))
def test_a_declaration_that_parses_but_drops_restricted_keeps_it_restricted(setup, mistake):
    from bot.core import KnowledgeBot

    settings, kbs, _ = setup
    with KnowledgeBot(settings) as bot:
        bot.refresh()
        path = kbs / "finance" / "kb.toml"
        path.write_text(MISTAKES_THAT_PARSE[mistake](path.read_text(encoding="utf-8")), encoding="utf-8")
        problems = bot.refresh()
        assert any("finance" in p for p in problems), problems
        outside = [v.name for v in bot.visible_kbs(Origin.slack_channel(PUBLIC, EMPLOYEE))]
        assert "finance" not in outside
        assert "finance" in [v.name for v in bot.visible_kbs(Origin.slack_channel(FINANCE, CFO))]


def test_a_copy_declaring_the_same_name_cannot_open_a_restricted_kb(setup):
    from bot.core import KnowledgeBot

    settings, kbs, _ = setup
    with KnowledgeBot(settings) as bot:
        bot.refresh()
        shutil.copytree(kbs / "finance", kbs / "board-public")
        copy = kbs / "board-public" / "kb.toml"
        copy.write_text(copy.read_text(encoding="utf-8").replace('"restricted"', '"public"'), encoding="utf-8")
        assert any("declared more than once" in p for p in bot.refresh())
        assert "finance" not in [v.name for v in bot.visible_kbs(Origin.slack_channel(PUBLIC, EMPLOYEE))]


def test_admins_cannot_change_a_kb_with_no_known_rules_from_slack(setup):
    from bot.core import KnowledgeBot, NotFound

    settings, kbs, _ = setup
    with sqlite3.connect(settings.data_dir / "registry.sqlite3") as db:
        db.execute("DELETE FROM kb_manifests WHERE kb = 'finance'")
    break_typo(kbs)
    admin = Origin.slack_dm("D0ADMIN001", "U0ADMIN001")
    with KnowledgeBot(settings.model_copy(update={"admin_users": "U0ADMIN001"})) as bot:
        assert "finance" not in bot.uploadable_kbs(admin)
        with pytest.raises(NotFound):
            bot.delete_document(admin, "finance", "revenue-targets-fy2027.md")
