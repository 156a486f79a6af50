"""App Home and the 👎 reason modal over real HTTP: signed requests into kbbot's endpoint, the fake Slack behind.

Every answer comes from the real engine over the sample KBs (offline mode); the assertions are on the Web API
calls kbbot makes (views.publish, views.open, chat.postMessage) and their payloads.
"""

from __future__ import annotations

import json
import time

from helpers.slack_helpers import FINANCE_MEMBERS, dm_channel, unique
from test_slack_surface import reply_text, wait_reply

from bot.slack.feedback_reason import COMMENT_ACTION, COMMENT_BLOCK, REASON_ACTION, REASON_BLOCK
from bot.slack.home import UPLOAD_ACTION_ID

PEOPLE, FINANCE = "C0PEOPLE01", "C0FINANCE1"
EMPLOYEE, HR_LEAD, CFO, ADMIN = "U0EMPLOY01", "U0HRLEAD01", "U0CFO00001", "U0ADMIN001"
TEAM, APP = "T0LUMEN001", "A0KBBOT0001"


def open_home(bot, user: str) -> dict:
    """The user opens the Home tab: the event is delivered, and the view kbbot publishes for them returned."""
    before = len([c for c in bot.fake.calls_of("views.publish") if c.params.get("user_id") == user])
    event = {
        "type": "app_home_opened",
        "user": user,
        "channel": dm_channel(user),
        "tab": "home",
        "event_ts": f"{time.time():.6f}",
    }
    assert bot.send.event(event).status == 200
    calls = bot.fake.wait_for(
        lambda: (
            (c := [c for c in bot.fake.calls_of("views.publish") if c.params.get("user_id") == user])[before:] and c
        ),
        what=f"views.publish for {user}",
    )
    view = calls[-1].params["view"]
    assert view["type"] == "home" and len(view["blocks"]) <= 100
    return view


def shown(view: dict) -> str:
    return reply_text({"blocks": view["blocks"]})


def upload_buttons(view: dict) -> list[str]:
    return [
        b["accessory"]["value"] for b in view["blocks"] if b.get("accessory", {}).get("action_id") == UPLOAD_ACTION_ID
    ]


def kb_names(view: dict) -> list[str]:
    names = []
    for block in view["blocks"]:
        text = (block.get("text") or {}).get("text") or ""
        if block["type"] == "section" and " document" in text.split("\n")[0] and text.startswith("*"):
            names.append(text[1 : text.index("*", 1)])
    return names


def click(bot, user: str, action: dict, **extra) -> tuple[str, object]:
    trigger = unique("trig.")
    payload = {
        "type": "block_actions",
        "user": {"id": user, "team_id": TEAM},
        "team": {"id": TEAM},
        "api_app_id": APP,
        "trigger_id": trigger,
        "actions": [{"action_ts": str(time.time()), **action}],
        **extra,
    }
    return trigger, bot.send.interaction(payload)


def click_upload(bot, user: str, kb: str) -> tuple[str, object]:
    return click(
        bot,
        user,
        {"type": "button", "action_id": UPLOAD_ACTION_ID, "block_id": "home", "value": kb},
        container={"type": "view", "view_id": "VHOME"},
        view={"id": "VHOME", "type": "home", "callback_id": ""},
    )


def thumbs(bot, user: str, channel: str, reply: dict, question_ts: str, good: bool = False) -> tuple[str, str]:
    """Click 👍/👎 under a bot reply; returns (answer id, trigger id)."""
    [feedback] = [e for b in reply["blocks"] or [] if b["type"] == "context_actions" for e in b["elements"]]
    value = feedback["positive_button" if good else "negative_button"]["value"]
    trigger, response = click(
        bot,
        user,
        {"type": "feedback_buttons", "action_id": feedback["action_id"], "block_id": "fb", "value": value},
        channel={"id": channel},
        container={"type": "message", "message_ts": reply["ts"], "channel_id": channel},
        message={"ts": reply["ts"], "thread_ts": question_ts, "text": reply["text"]},
        response_url=f"{bot.fake.base}/response/{unique('R')}",
    )
    assert response.status == 200
    return value.split(":", 1)[1], trigger


def submit_reason(bot, user: str, view: dict, reason: str | None, comment: str | None):
    values = {}
    if reason:
        values[REASON_BLOCK] = {REASON_ACTION: {"type": "radio_buttons", "selected_option": {"value": reason}}}
    values[COMMENT_BLOCK] = {COMMENT_ACTION: {"type": "plain_text_input", "value": comment}}
    payload = {
        "type": "view_submission",
        "team": {"id": TEAM},
        "user": {"id": user, "team_id": TEAM},
        "api_app_id": APP,
        "trigger_id": unique("trig."),
        "view": {
            "id": "VREASON",
            "type": "modal",
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "team_id": TEAM,
            "state": {"values": values},
        },
    }
    return bot.send.interaction(payload)


def ask_refused(bot, channel: str, user: str, text: str) -> None:
    message, _ = bot.send.mention(channel, user, text)
    [reply] = wait_reply(bot, channel, message["ts"])
    [record] = bot.kbbot.records.answers_in(channel, message["ts"])
    assert record["status"] == "insufficient_context", reply_text(reply)


# --- App Home --------------------------------------------------------------------------------------


def test_a_reader_sees_the_kbs_they_may_read_how_to_ask_and_no_upload_or_gaps(bot):
    view = open_home(bot, EMPLOYEE)
    assert kb_names(view) == ["engineering", "people", "product"]  # not finance: not a member of its channel
    text = shown(view)
    assert "How to ask" in text and "Answers first in <#C0PEOPLE01>" in text and "last updated 20" in text
    assert not upload_buttons(view) and "Knowledge gaps" not in text
    assert any(c.params.get("channel") == FINANCE for c in bot.fake.calls_of("conversations.members"))


def test_an_uploader_sees_upload_failed_documents_and_gaps_of_their_kb_only(bot):
    registry = bot.kbbot.service.store.registry  # an ingest interrupted for good: what recovery leaves behind
    pending = registry.begin_versions("people", [("broken-policy.pdf", "0" * 64)])
    registry.abandon_versions(pending, "ingest was interrupted")
    ask_refused(bot, PEOPLE, EMPLOYEE, "What colour is the office parrot Kiwi?")
    ask_refused(bot, PEOPLE, EMPLOYEE, "The office parrot Kiwi: what colour is it?")
    view = open_home(bot, HR_LEAD)
    assert upload_buttons(view) == ["people"]  # an uploader of people only
    text = shown(view)
    assert "broken-policy.pdf" in text and "Failed documents (1)" in text and "ingest was interrupted" in text
    [gap] = [b["text"]["text"] for b in view["blocks"] if "parrot" in json.dumps(b)]
    assert "Kiwi" in gap and "refused 2×" in gap and "last asked today" in gap and "people" in gap
    reader = shown(open_home(bot, EMPLOYEE))
    assert "broken-policy.pdf" not in reader and "parrot" not in reader


def test_the_upload_button_opens_the_upload_modal_and_is_checked_again(bot):
    trigger, response = click_upload(bot, HR_LEAD, "people")
    assert response.status == 200
    [opened] = bot.fake.wait_for(lambda: bot.fake.calls_of("views.open"), what="the upload modal")
    assert opened.params["trigger_id"] == trigger
    modal = opened.params["view"]
    assert modal["callback_id"] == "kb_upload"
    select = modal["blocks"][0]["element"]
    assert select["initial_option"]["value"] == "people" and [o["value"] for o in select["options"]] == ["people"]
    # a reader forging the click: no form, a refusal naming the uploaders; a KB it cannot see does not exist
    click_upload(bot, EMPLOYEE, "people")
    click_upload(bot, EMPLOYEE, "finance")
    refusals = bot.fake.wait_for(
        lambda: (
            (m := [c for c in bot.fake.calls_of("chat.postMessage") if c.params.get("channel") == EMPLOYEE])[1:] and m
        ),
        what="two refusals",
    )
    texts = sorted(c.params["text"] for c in refusals)
    assert texts[0].startswith(":no_entry: Only the uploaders of `people`") and "<@U0HRLEAD01>" in texts[0]
    assert texts[1] == "There is no knowledge base `finance`. See `/kb list`."
    assert len(bot.fake.calls_of("views.open")) == 1


def test_a_restricted_kb_is_shown_only_to_members_and_membership_failure_closes_it(bot):
    ask_refused(bot, FINANCE, CFO, "How many ponies does the treasury keep?")
    cfo = open_home(bot, CFO)
    assert "finance" in kb_names(cfo) and upload_buttons(cfo) == ["finance"]
    assert "ponies" in shown(cfo)
    bot.fake.members[FINANCE] = [m for m in FINANCE_MEMBERS if m != ADMIN]  # an admin outside the channel
    bot.kbbot.membership.forget()  # (memberships are kept for a minute)
    admin = open_home(bot, ADMIN)
    assert "finance" not in kb_names(admin) and "finance" not in upload_buttons(admin)
    assert upload_buttons(admin) == ["engineering", "people", "product"]
    assert "ponies" not in shown(admin) and "Knowledge gaps" in shown(admin)
    bot.kbbot.membership.forget()
    bot.fake.errors["conversations.members"] = "internal_error"
    closed = open_home(bot, CFO)
    assert "finance" not in kb_names(closed) and "ponies" not in shown(closed)
    assert "could not be checked" in shown(closed) and "internal_error" not in shown(closed)


def test_the_messages_tab_builds_nothing(bot):
    event = {"type": "app_home_opened", "user": EMPLOYEE, "channel": dm_channel(EMPLOYEE), "tab": "messages"}
    assert bot.send.event(event).status == 200
    bot.settle()
    time.sleep(0.2)
    assert not bot.fake.calls_of("views.publish")


# --- 👎 reasons ---------------------------------------------------------------------------------------


def test_thumbs_down_opens_the_reason_modal_and_the_reason_reaches_the_owners_home(bot):
    message, _ = bot.send.mention(PEOPLE, EMPLOYEE, "How many vacation days do full-time staff get per year?")
    [reply] = wait_reply(bot, PEOPLE, message["ts"])
    answer_id, trigger = thumbs(bot, EMPLOYEE, PEOPLE, reply, message["ts"])
    [opened] = bot.fake.wait_for(lambda: bot.fake.calls_of("views.open"), what="the reason modal")
    assert opened.params["trigger_id"] == trigger
    modal = opened.params["view"]
    assert modal["callback_id"] == "kb_feedback_reason" and modal["close"]["text"] == "Skip"
    assert json.loads(modal["private_metadata"])["answer_id"] == answer_id
    # the plain 👎 is recorded at once (closing the modal keeps it)
    [plain] = bot.fake.wait_for(lambda: bot.kbbot.records.feedback_for(answer_id), what="the 👎")
    assert plain["value"] == "bad" and plain["reason"] is None
    assert submit_reason(bot, EMPLOYEE, modal, "outdated", "We moved to 28 days in <!here> 2026").status == 200
    bot.fake.wait_for(lambda: bot.kbbot.records.feedback_for(answer_id)[0]["reason"], what="the reason")
    [record] = bot.kbbot.records.feedback_for(answer_id)
    assert record["reason"] == "outdated" and record["comment"].startswith("We moved to 28 days")
    owners = open_home(bot, HR_LEAD)
    [gap] = [b["text"]["text"] for b in owners["blocks"] if "vacation days" in json.dumps(b)]
    assert ":thumbsdown: 1× (outdated 1)" in gap and "We moved to 28 days" in gap
    assert "<!here>" not in gap and "&lt;!here&gt;" in gap


def test_a_reason_modal_sent_empty_or_a_thumbs_up_changes_nothing(bot):
    message, _ = bot.send.mention(PEOPLE, EMPLOYEE, "How many paid sick days are there per year?")
    [reply] = wait_reply(bot, PEOPLE, message["ts"])
    answer_id, _ = thumbs(bot, EMPLOYEE, PEOPLE, reply, message["ts"])
    [opened] = bot.fake.wait_for(lambda: bot.fake.calls_of("views.open"), what="the reason modal")
    bot.fake.wait_for(lambda: bot.kbbot.records.feedback_for(answer_id), what="the 👎")
    assert submit_reason(bot, EMPLOYEE, opened.params["view"], None, "   ").status == 200
    bot.settle()
    [record] = bot.kbbot.records.feedback_for(answer_id)
    assert record["reason"] is None and record["comment"] is None
    good_id, _ = thumbs(bot, HR_LEAD, PEOPLE, reply, message["ts"], good=True)
    bot.fake.wait_for(lambda: len(bot.kbbot.records.feedback_for(good_id)) == 2, what="the 👍")
    assert len(bot.fake.calls_of("views.open")) == 1  # 👍 asks nothing
