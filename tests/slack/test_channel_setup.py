"""Channels set up from Slack (`/kb channel …`) over real HTTP: signed slash commands and events into kbbot's
endpoint, the fake Slack Web API behind it, the real engine over the sample KBs (offline).

Which KBs a channel searches first is changed by that KB's uploaders or the admins and stored durably (kb.toml
stays the declared default); access rules stay in kb.toml; auto-reply (admins) answers top-level questions
without a mention only when the answer is found.
"""

from __future__ import annotations

import json
import shutil

import pytest
from helpers.fake_slack import FakeSlack
from helpers.slackbot import running_bot, slack_settings_for

PEOPLE, ENG, FINANCE = "C0PEOPLE01", "C0ENG00001", "C0FINANCE1"
EMPLOYEE, HR_LEAD, CFO, ENG_LEAD, ADMIN = "U0EMPLOY01", "U0HRLEAD01", "U0CFO00001", "U0ENGLEAD1", "U0ADMIN001"
VACATION = "How many vacation days do full-time staff get per year?"


@pytest.fixture(scope="module")
def slack_settings(slack_data_dir, fake_slack):
    return slack_settings_for(slack_data_dir, fake_slack.api_url, KBBOT_ADMIN_USERS=ADMIN)


def command(bot, text: str, user: str, channel: str) -> str:
    """`/kb …` and the text of its ephemeral reply (the ack's, or the one sent to the response_url)."""
    response, rid, _ = bot.send.command(text, user, channel)
    assert response.status == 200 and response.elapsed_s < 1.0
    if response.body:  # Bolt acknowledges with the text itself, or with a JSON message
        return response.json().get("text", "") if response.body.startswith("{") else response.body
    [reply] = bot.fake.wait_for(lambda: bot.send.responses(rid), what=f"/kb {text} response")
    assert reply["response_type"] == "ephemeral"
    return reply["text"]


def kb_list_text(bot, user: str, channel: str) -> str:
    _, rid, _ = bot.send.command("list", user, channel)
    [listing] = bot.fake.wait_for(lambda: bot.send.responses(rid), what="/kb list response")
    return json.dumps(listing["blocks"])


def wait_reply(bot, channel: str, thread_ts: str) -> list[dict]:
    return bot.fake.wait_for(lambda: bot.fake.bot_replies(channel, thread_ts), timeout=30, what="a bot reply")


def test_kb_channel_shows_what_the_channel_searches_first(bot):
    text = command(bot, "channel", EMPLOYEE, PEOPLE)
    assert f"<#{PEOPLE}> searches first:* `people` (its kb.toml)" in text
    assert "`engineering`" in text and "`product`" in text  # also searched here
    assert "finance" not in text  # restricted elsewhere: not even named
    assert "Auto-reply is off" in text
    assert "/kb channel" in command(bot, "help", EMPLOYEE, PEOPLE)
    assert "Run `/kb channel` in the channel" in command(bot, "channel", EMPLOYEE, "D0EMPLOY01")
    assert command(bot, "channel frobnicate", EMPLOYEE, PEOPLE).startswith("Usage: `/kb channel`")


def test_a_kbs_uploaders_put_it_first_in_a_channel_and_take_it_out(bot):
    refused = command(bot, "channel add engineering", EMPLOYEE, PEOPLE)
    assert "Only the uploaders of `engineering`" in refused and "<@U0ENGLEAD1>" in refused
    assert "`engineering` (added" not in command(bot, "channel", EMPLOYEE, PEOPLE)

    added = command(bot, "channel add engineering", ENG_LEAD, PEOPLE)
    assert f"<#{PEOPLE}> now searches `engineering` first" in added
    assert "already searches" in command(bot, "channel add engineering", ENG_LEAD, PEOPLE)
    shown = command(bot, "channel", EMPLOYEE, PEOPLE)
    assert "`people` (its kb.toml), `engineering` (added by <@U0ENGLEAD1>)" in shown or (
        "`engineering` (added by <@U0ENGLEAD1>), `people` (its kb.toml)" in shown
    )
    assert f"Searched first in <#{ENG}>, <#{PEOPLE}>" in kb_list_text(bot, EMPLOYEE, PEOPLE)
    # Routing searches both first. (Not checked through the status line: the latest status wins there, and a
    # quick answer replaces "Searching engineering, people…" before it is sent.)
    message, _ = bot.send.mention(PEOPLE, EMPLOYEE, VACATION)
    wait_reply(bot, PEOPLE, message["ts"])
    [record] = bot.kbbot.records.answers_in(PEOPLE, message["ts"])
    assert set(record["trace"]["route"]["scores"]) == {"engineering", "people"}

    # An uploader of people takes its kb.toml default out of the channel; the engineering lead takes hers.
    assert "no longer searches `people` first" in command(bot, "channel remove people", HR_LEAD, PEOPLE)
    assert "no longer searches `engineering` first" in command(bot, "channel remove engineering", ADMIN, PEOPLE)
    assert "didn't search `engineering` first" in command(bot, "channel remove engineering", ENG_LEAD, PEOPLE)
    assert "searches no knowledge base first" in command(bot, "channel", EMPLOYEE, PEOPLE)
    assert f"<#{PEOPLE}>" not in kb_list_text(bot, EMPLOYEE, PEOPLE)
    assert "now searches `people` first" in command(bot, "channel add people", HR_LEAD, PEOPLE)  # back as declared
    assert "no knowledge base `nonsense`" in command(bot, "channel add nonsense", ADMIN, PEOPLE)


def test_a_restricted_kb_cannot_be_put_first_where_it_may_not_be_read(bot):
    for user in (CFO, ADMIN):  # its uploader, and an admin: kb.toml's access rules bind everyone
        refused = command(bot, "channel add finance", user, PEOPLE)
        assert "`finance` is restricted to its allowed channels" in refused, user
    assert "finance" not in command(bot, "channel", CFO, PEOPLE)
    assert not [c for c in bot.kbbot.channel_setup.changes(PEOPLE) if c.kb == "finance"]
    # Someone who may not read it there is told it does not exist (as anywhere else).
    assert "no knowledge base `finance`" in command(bot, "channel add finance", EMPLOYEE, PEOPLE)
    # Where it may be read, its uploader may change it.
    assert "no longer searches `finance` first" in command(bot, "channel remove finance", CFO, FINANCE)
    assert "now searches `finance` first" in command(bot, "channel add finance", CFO, FINANCE)


AUTO = "C0AUTOREP1"


def test_auto_reply_is_for_admins_and_answers_only_what_it_finds(bot):
    assert "Only kbbot's admins" in command(bot, "channel autoreply on", HR_LEAD, AUTO)
    question, _ = bot.send.message(AUTO, EMPLOYEE, VACATION)
    bot.settle()
    assert not bot.fake.bot_replies(AUTO)  # still off: top-level chatter is not answered

    assert "Auto-reply is on" in command(bot, "channel autoreply on", ADMIN, AUTO)
    assert "Auto-reply is *on*" in command(bot, "channel", EMPLOYEE, AUTO)
    question, response = bot.send.message(AUTO, EMPLOYEE, VACATION)
    assert response.status == 200
    [reply] = wait_reply(bot, AUTO, question["ts"])
    assert "25 days" in (reply.get("text") or "")
    # Nobody asked kbbot: no :eyes:, no status while it searched.
    assert not bot.fake.calls_of("reactions.add") and not bot.fake.calls_of("assistant.threads.setStatus")

    # Refusals are silent: no reply, no reaction, nothing recorded (no knowledge gap from chatter).
    chatter, _ = bot.send.message(AUTO, EMPLOYEE, "lunch anyone? the new ramen place opens today")
    secret, _ = bot.send.message(AUTO, CFO, "What is the Q3 FY2027 revenue target?")
    bot.settle()
    bot.fake.wait_for(lambda: bot.deps.idle(), what="the refusals")
    for message in (chatter, secret):
        assert not bot.fake.bot_replies(AUTO, message["ts"])
        assert not bot.kbbot.records.answers_in(AUTO, message["ts"])
    assert not bot.fake.calls_of("reactions.add")

    assert "Auto-reply is off" in command(bot, "channel autoreply off", ADMIN, AUTO)
    later, _ = bot.send.message(AUTO, EMPLOYEE, VACATION)
    bot.settle()
    assert not bot.fake.bot_replies(AUTO, later["ts"])


def test_auto_reply_never_answers_bots_foreign_threads_or_twice(bot):
    command(bot, "channel autoreply on", ADMIN, AUTO)
    before = bot.deps.answers.submitted
    bot.send.event(
        {"type": "message", "subtype": "bot_message", "channel": AUTO, "bot_id": "B0OTHER001", "text": VACATION,
         "ts": bot.fake.next_ts(), "channel_type": "channel"}
    )  # fmt: skip
    bot.send.event(
        {"type": "message", "channel": AUTO, "user": "U0OTHERBOT", "bot_id": "B0OTHER002", "text": VACATION,
         "ts": bot.fake.next_ts(), "channel_type": "channel"}
    )  # fmt: skip
    parent = bot.fake.add_message(AUTO, EMPLOYEE, "weekend plans?")
    in_thread, _ = bot.send.message(AUTO, HR_LEAD, VACATION, thread_ts=parent["ts"])
    bot.settle()
    assert not bot.fake.bot_replies(AUTO)
    assert not [c for c in bot.fake.calls if c.method.startswith(("chat.", "reactions."))]
    assert bot.deps.answers.submitted == before + 1  # only the thread check (kbbot was never in that thread)

    # One message delivered under two event ids (a retry with a new id, a second subscription): one reply.
    message = bot.fake.add_message(AUTO, EMPLOYEE, "And how many paid sick days are there per year?")
    event = {"type": "message", "channel": AUTO, "user": EMPLOYEE, "text": message["text"], "ts": message["ts"]}
    assert bot.send.event({**event, "channel_type": "channel"}).status == 200
    assert bot.send.event({**event, "channel_type": "channel"}).status == 200
    wait_reply(bot, AUTO, message["ts"])
    bot.settle()
    assert len(bot.fake.bot_replies(AUTO, message["ts"])) == 1


@pytest.fixture
def fresh_world(synced_data_dir, tmp_path):
    shutil.copytree(synced_data_dir, tmp_path / "data")
    fake = FakeSlack().start()
    yield slack_settings_for(tmp_path / "data", fake.api_url, KBBOT_ADMIN_USERS=ADMIN), fake
    fake.stop()


def test_channel_setup_survives_a_restart_and_shows_in_kb_list(fresh_world, run_cli):
    settings, fake = fresh_world
    with running_bot(settings, fake, warm=False) as first:
        assert "now searches `product` first" in command(first, "channel add product", ADMIN, ENG)
        assert "no longer searches `engineering` first" in command(first, "channel remove engineering", ADMIN, ENG)
        assert "Auto-reply is on" in command(first, "channel autoreply on", ADMIN, ENG)
    with running_bot(settings, fake, warm=False) as second:
        shown = command(second, "channel", EMPLOYEE, ENG)
        assert f"<#{ENG}> searches first:* `product` (added by <@{ADMIN}>)" in shown
        assert "Auto-reply is *on*" in shown
    listed = {kb["name"]: kb["channels"] for kb in json.loads(run_cli(settings, "kb", "list", "--json").out)}
    assert listed["product"] == ["C0PRODUCT1", ENG] and listed["engineering"] == []
    assert "  searched first in: C0PRODUCT1, C0ENG00001" in run_cli(settings, "kb", "list").out
