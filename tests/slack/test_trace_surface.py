"""'How I found this' and the trust signals in Sources over real HTTP: signed requests into kbbot's endpoint,
the fake Slack Web API behind it, answers from the real engine over the sample KBs (offline).
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime

import pytest
from helpers.fake_slack import TEAM, FakeSlack
from helpers.slack_helpers import APP_ID, SlackSender, dm_channel, unique
from helpers.slackbot import running_bot, slack_settings_for, spawn_serve

from bot.slack.render import STALE_MARK, TRACE_ACTION_ID
from bot.slack.trace import GONE, REFUSED

PEOPLE, ENG, FINANCE = "C0PEOPLE01", "C0ENG00001", "C0FINANCE1"
EMPLOYEE, HR_LEAD, CFO = "U0EMPLOY01", "U0HRLEAD01", "U0CFO00001"
VACATION = "How many vacation days do full-time staff get per year?"
REVENUE = "What is the Q3 FY2027 revenue target?"


def all_text(payload: object) -> str:
    """Every string a person would read in a payload (text and block text)."""
    parts: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                parts.append(value) if key == "text" and isinstance(value, str) else walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(payload)
    return "\n".join(parts)


def ask(bot, channel: str, user: str, text: str) -> tuple[dict, dict]:
    """Ask (a mention in a channel, else a DM) and return (the question, the finished reply)."""
    if channel.startswith("D"):
        question, _ = bot.send.dm(user, text)
    else:
        question, _ = bot.send.mention(channel, user, text)
    [reply] = bot.fake.wait_for(
        lambda: bot.fake.bot_replies(channel, question["ts"]), timeout=30, what=f"the reply in {channel}"
    )
    return question, reply


def trace_button(reply: dict) -> dict:
    [button] = [
        e
        for b in reply.get("blocks") or []
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == TRACE_ACTION_ID
    ]
    return button


def click_trace(send: SlackSender, user: str, channel: str, reply: dict, value: str | None = None):
    """Slack's block_actions request for a click on 'How I found this' under `reply`."""
    button = trace_button(reply)
    return send.interaction(
        {
            "type": "block_actions",
            "user": {"id": user},
            "team": {"id": TEAM},
            "api_app_id": APP_ID,
            "channel": {"id": channel},
            "container": {"type": "message", "message_ts": reply["ts"], "channel_id": channel},
            "message": {"ts": reply["ts"], "thread_ts": reply.get("thread_ts"), "text": reply.get("text", "")},
            "actions": [
                {
                    "type": "button",
                    "action_id": button["action_id"],
                    "block_id": "trace",
                    "value": value or button["value"],
                    "action_ts": str(time.time()),
                }
            ],
            "trigger_id": unique("trig."),
            "response_url": f"{send.fake.base}/response/{unique('R')}",
        }
    )


def ephemeral_to(fake: FakeSlack, user: str, timeout: float = 20.0) -> dict:
    [call] = fake.wait_for(
        lambda: [c for c in fake.calls_of("chat.postEphemeral") if c.params.get("user") == user][-1:],
        timeout=timeout,
        what=f"an ephemeral message to {user}",
    )
    return call.params


# --- "How I found this" ---------------------------------------------------------------------------


def test_how_i_found_this_shows_the_stored_trace_to_the_person_who_clicks(bot):
    question, reply = ask(bot, PEOPLE, EMPLOYEE, VACATION)
    answer_id = trace_button(reply)["value"]
    record = bot.kbbot.answer_record(answer_id)
    assert record["question"] == VACATION

    response = click_trace(bot.send, HR_LEAD, PEOPLE, reply)  # anyone in the channel may look
    assert response.status == 200
    shown = ephemeral_to(bot.fake, HR_LEAD)
    assert shown["channel"] == PEOPLE and shown["thread_ts"] == question["ts"]  # beside the answer, for her only
    text = all_text(shown["blocks"])
    assert f"*Standalone query:* “{record['standalone_query']}”" in text
    for kb, score in record["trace"]["route"]["scores"].items():  # every KB considered, with its score
        assert f"`{kb}` {score:.3f}" in text
    [first] = record["trace"]["rounds"][:1]
    assert "*Round 1* — searched `people`" in text and ":white_check_mark: enough evidence" in text
    best = first["evidence"][0]
    assert best["document"] == "annual-and-sick-leave.md" and f"`{best['score']:.3f}` · *{best['document']}*" in text
    assert "Answered, citing [1] annual-and-sick-leave.md" in text
    assert len(shown["blocks"]) <= 50
    assert not [c for c in bot.fake.calls_of("chat.postEphemeral") if c.params.get("user") != HR_LEAD]


def test_a_refusal_has_the_button_too_and_its_trace_names_only_what_was_searched(bot):
    _, reply = ask(bot, ENG, EMPLOYEE, REVENUE)  # finance is restricted: not searched in #engineering
    assert "don't have enough to answer" in all_text(reply)
    click_trace(bot.send, EMPLOYEE, ENG, reply)
    text = all_text(ephemeral_to(bot.fake, EMPLOYEE)["blocks"])
    assert "Not answered" in text and ":x: not enough evidence" in text and "*Round 1*" in text
    assert "finance" not in text and "revenue-targets" not in text


def test_a_trace_naming_a_restricted_kb_is_refused_where_the_clicker_cannot_read_it(bot):
    _, reply = ask(bot, FINANCE, CFO, REVENUE)
    assert "21.6" in all_text(reply)
    click_trace(bot.send, CFO, FINANCE, reply)  # in #finance: shown
    assert "`finance`" in all_text(ephemeral_to(bot.fake, CFO)["blocks"])

    # The same answer's trace asked for from #engineering (a forwarded or replayed click): refused, politely.
    click_trace(bot.send, EMPLOYEE, ENG, reply)
    refused = ephemeral_to(bot.fake, EMPLOYEE)
    assert refused["text"] == REFUSED and "blocks" not in refused
    assert "finance" not in json.dumps(refused) and "21.6" not in json.dumps(refused)


def test_a_dm_trace_follows_the_clickers_membership_now(bot):
    channel = dm_channel(CFO)
    _, reply = ask(bot, channel, CFO, REVENUE)
    assert "21.6" in all_text(reply)
    click_trace(bot.send, CFO, channel, reply)
    assert "`finance`" in all_text(ephemeral_to(bot.fake, CFO)["blocks"])
    assert any(c.params.get("channel") == FINANCE for c in bot.fake.calls_of("conversations.members"))

    bot.fake.members[FINANCE].remove(CFO)  # she has left #finance since
    bot.kbbot.membership.forget()
    bot.fake.calls.clear()
    click_trace(bot.send, CFO, channel, reply)
    refused = ephemeral_to(bot.fake, CFO)
    assert refused["text"] == REFUSED and "finance" not in json.dumps(refused)

    click_trace(bot.send, EMPLOYEE, dm_channel(EMPLOYEE), reply)  # someone else's DM answer: never theirs
    assert ephemeral_to(bot.fake, EMPLOYEE)["text"] == REFUSED


def test_an_unknown_answer_gets_a_plain_reply(bot):
    _, reply = ask(bot, PEOPLE, EMPLOYEE, VACATION)
    click_trace(bot.send, EMPLOYEE, PEOPLE, reply, value="0123456789abcdef")
    assert ephemeral_to(bot.fake, EMPLOYEE)["text"] == GONE


# --- trust signals in Sources ------------------------------------------------------------------------


OFFICE_DOG = b"""# Office pets

The Lumen Freight office dog is called Biscuit. Biscuit is a golden retriever who visits the London office every Friday.
"""


def upload_by_modal(bot, user: str, kb: str, meta: dict) -> None:
    submission = {
        "type": "view_submission",
        "team": {"id": TEAM},
        "user": {"id": user, "team_id": TEAM},
        "api_app_id": APP_ID,
        "trigger_id": unique("trig."),
        "view": {
            "id": "V1",
            "type": "modal",
            "callback_id": "kb_upload",
            "private_metadata": json.dumps({"channel": PEOPLE}),
            "team_id": TEAM,
            "state": {
                "values": {
                    "kb": {"kb_select": {"type": "static_select", "selected_option": {"value": kb}}},
                    "files": {"kb_files": {"type": "file_input", "files": [meta]}},
                }
            },
        },
    }
    assert bot.send.interaction(submission).status == 200
    bot.fake.wait_for(lambda: bot.fake.calls_of("chat.postEphemeral"), timeout=60, what="the upload report")


def test_sources_name_the_uploader_and_the_update_day_and_mark_old_documents(bot):
    bot.deps.people.forget()
    bot.fake.users[HR_LEAD] = {"name": "dana", "profile": {"display_name": "Dana (HR)", "real_name": "Dana Lee"}}
    name = f"office-pets-{unique('')}.md"
    upload_by_modal(bot, HR_LEAD, "people", bot.fake.add_file(name, OFFICE_DOG))

    _, reply = ask(bot, PEOPLE, EMPLOYEE, "What is the office dog called?")
    text = all_text(reply)
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert "Biscuit" in text and name in text
    assert f"updated {today} · uploaded by Dana (HR)" in text and STALE_MARK not in text
    assert "<@U0HRLEAD01>" not in text  # a name, not a mention: being cited never pings the uploader
    assert [c.params["user"] for c in bot.fake.calls_of("users.info")] == [HR_LEAD]
    [cited] = [
        c for c in bot.kbbot.records.answers_in(PEOPLE, reply["thread_ts"])[-1]["citations"] if c["document"] == name
    ]
    assert cited["uploaded_by"] == HR_LEAD and cited["stale"] is False

    # A year and a bit later (the application layer's clock), the same document is possibly outdated;
    # a document synced from docs/ has no uploader.
    real_clock = bot.kbbot.clock
    bot.kbbot.clock = lambda: time.time() + 400 * 86_400
    try:
        _, reply = ask(bot, PEOPLE, EMPLOYEE, "What is the office dog called?")
        _, synced = ask(bot, PEOPLE, EMPLOYEE, VACATION)
    finally:
        bot.kbbot.clock = real_clock
    assert f"updated {today} · uploaded by Dana (HR) · {STALE_MARK}" in all_text(reply)
    synced_text = all_text(synced)
    assert f"updated {today} · {STALE_MARK}" in synced_text and "uploaded" not in synced_text
    assert len(bot.fake.calls_of("users.info")) == 1  # the name is kept

    _, rid, _ = bot.send.command(f"delete people {name}", HR_LEAD, PEOPLE)
    bot.fake.wait_for(lambda: bot.send.responses(rid), what="/kb delete response")


def test_an_uploader_whose_name_cannot_be_looked_up_is_not_named(bot):
    bot.deps.people.forget()  # names looked up by earlier tests
    bot.fake.errors["users.info"] = "missing_scope"
    name = f"desk-{unique('')}.md"
    doc = b"# Desk booking\n\nDesks in the Berlin office are booked with the Deskly app, up to 14 days ahead.\n"
    upload_by_modal(bot, HR_LEAD, "people", bot.fake.add_file(name, doc))
    _, reply = ask(bot, PEOPLE, EMPLOYEE, "How are desks in the Berlin office booked?")
    text = all_text(reply)
    assert "Deskly" in text and "uploaded from Slack" in text and HR_LEAD not in text, text
    _, rid, _ = bot.send.command(f"delete people {name}", HR_LEAD, PEOPLE)
    bot.fake.wait_for(lambda: bot.send.responses(rid), what="/kb delete response")


# --- after a restart ---------------------------------------------------------------------------------


@pytest.fixture
def restart_world(synced_data_dir, tmp_path):
    shutil.copytree(synced_data_dir, tmp_path / "data")
    fake = FakeSlack().start()
    fake.members = {FINANCE: [CFO]}
    settings = slack_settings_for(tmp_path / "data", fake.api_url, KBBOT_SLACK_STREAMING="off")
    yield settings, fake, tmp_path
    fake.stop()


def test_the_trace_is_read_from_the_records_after_a_restart(restart_world):
    settings, fake, workdir = restart_world
    with running_bot(settings, fake) as first:
        _, reply = ask(first, PEOPLE, EMPLOYEE, VACATION)
        _, finance_reply = ask(first, FINANCE, CFO, REVENUE)
    first.kbbot.close()  # the store and the records are let go: only the data dir remains

    serve = spawn_serve(settings, workdir, KBBOT_SLACK_WARMUP="off")  # a new process: nothing in memory
    try:
        serve.wait_healthy()
        send = SlackSender(serve.url, fake)
        assert click_trace(send, HR_LEAD, PEOPLE, reply).status == 200
        shown = ephemeral_to(fake, HR_LEAD, timeout=60)
        text = all_text(shown["blocks"])
        assert "*Round 1* — searched `people`" in text and "annual-and-sick-leave.md" in text
        assert shown["channel"] == PEOPLE and shown["thread_ts"] == reply["thread_ts"]
        click_trace(send, EMPLOYEE, ENG, finance_reply)  # and the rules still hold
        assert ephemeral_to(fake, EMPLOYEE, timeout=60)["text"] == REFUSED
    finally:
        serve.process.terminate()
        serve.process.wait(timeout=60)
