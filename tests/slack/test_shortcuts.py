"""Message shortcuts over real HTTP: signed `message_action` payloads into kbbot's endpoint, the fake Slack Web
API behind it, the real engine over the sample KBs (offline).

"Ask kbbot about this" answers the message in its thread with the thread as history, under the same channel
rules as a mention. "Save to a knowledge base" turns the thread into a document (uploaders only), with the
thread's permalink as the source link; saving again replaces it.
"""

from __future__ import annotations

import pytest
from helpers.fake_slack import BOT_ID, BOT_USER, permalink
from helpers.slack_helpers import dm_channel

from bot.core import Origin
from bot.slack.builders import KB_ACTION, KB_BLOCK
from bot.slack.shortcut_views import (
    ASK_SHORTCUT_ID,
    SAVE_CALLBACK_ID,
    SAVE_SHORTCUT_ID,
    TITLE_ACTION,
    TITLE_BLOCK,
)
from bot.slack.thread_document import document_name

PEOPLE, ENG, FINANCE = "C0PEOPLE01", "C0ENG00001", "C0FINANCE1"
EMPLOYEE, HR_LEAD, CFO = "U0EMPLOY01", "U0HRLEAD01", "U0CFO00001"


def reply_text(message: dict) -> str:
    parts = [message.get("text") or ""]

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                parts.append(value) if key == "text" and isinstance(value, str) else walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(message.get("blocks") or [])
    return "\n".join(parts)


def wait_reply(bot, channel: str, thread_ts: str, count: int = 1) -> list[dict]:
    return bot.fake.wait_for(
        lambda: (r := bot.fake.bot_replies(channel, thread_ts)) and len(r) >= count and r,
        timeout=30,
        what=f"{count} bot repl(ies) in {channel}/{thread_ts}",
    )


def wait_response(bot, response_id: str) -> dict:
    return bot.fake.wait_for(lambda: bot.send.responses(response_id), what="an ephemeral response")[-1]


def live_text(bot, kb: str, document: str) -> str:
    chunks = [c for c in bot.kbbot.service.store.live_chunks(kb) if c.document == document]
    return "\n".join(c.text for c in chunks)


# --- Ask kbbot about this --------------------------------------------------------------------


def test_ask_about_a_thread_reply_answers_in_its_thread_with_the_thread_as_history(bot):
    parent = bot.fake.add_message(
        PEOPLE, EMPLOYEE, "How much fully paid time off does the primary caregiver get when a baby arrives?"
    )
    message = bot.fake.add_message(PEOPLE, HR_LEAD, "And what about the secondary caregiver?", thread_ts=parent["ts"])
    response, rid, _ = bot.send.message_shortcut(ASK_SHORTCUT_ID, EMPLOYEE, PEOPLE, message)
    assert response.status == 200 and response.elapsed_s < 1.0
    [reply] = wait_reply(bot, PEOPLE, parent["ts"])
    assert "6 weeks" in reply_text(reply) and "Sources" in reply_text(reply)
    [read] = [c.params for c in bot.fake.calls_of("conversations.replies")]
    assert read["channel"] == PEOPLE and read["ts"] == parent["ts"]
    assert any(c.params.get("timestamp") == message["ts"] for c in bot.fake.calls_of("reactions.add"))
    [record] = bot.kbbot.records.answers_in(PEOPLE, parent["ts"])
    assert record["question"] == "And what about the secondary caregiver?" and record["user"] == EMPLOYEE
    assert "baby" in record["standalone_query"]  # the thread was the history
    # Asked about again (by anyone): one answer per message, the asker is told where it is.
    _, rid, _ = bot.send.message_shortcut(ASK_SHORTCUT_ID, HR_LEAD, PEOPLE, message)
    assert "already answered" in wait_response(bot, rid)["text"]
    bot.settle()
    assert len(bot.fake.bot_replies(PEOPLE, parent["ts"])) == 1


def test_ask_about_a_top_level_message_uses_its_later_replies_and_answers_under_it(bot):
    parent = bot.fake.add_message(PEOPLE, HR_LEAD, "Reminder about the doctor's note rule for sick days")
    bot.fake.add_message(PEOPLE, EMPLOYEE, "after how many days is it needed?", thread_ts=parent["ts"])
    bot.send.message_shortcut(ASK_SHORTCUT_ID, EMPLOYEE, PEOPLE, parent)
    [reply] = wait_reply(bot, PEOPLE, parent["ts"])
    assert "3 consecutive sick days" in reply_text(reply)


def test_ask_about_follows_the_channel_rules_of_a_mention(bot):
    question = "What is the Q3 FY2027 revenue target?"
    in_eng = bot.fake.add_message(ENG, EMPLOYEE, question)
    in_finance = bot.fake.add_message(FINANCE, EMPLOYEE, question)
    bot.send.message_shortcut(ASK_SHORTCUT_ID, CFO, ENG, in_eng)  # a finance member, in a channel finance is not
    bot.send.message_shortcut(ASK_SHORTCUT_ID, CFO, FINANCE, in_finance)
    eng_reply = reply_text(wait_reply(bot, ENG, in_eng["ts"])[0])
    finance_reply = reply_text(wait_reply(bot, FINANCE, in_finance["ts"])[0])
    assert "21.6" not in eng_reply and "revenue-targets" not in eng_reply
    assert "$21.6M" in finance_reply
    [eng_record] = bot.kbbot.records.answers_in(ENG, in_eng["ts"])
    assert "finance" not in eng_record["kbs"] and eng_record["status"] == "insufficient_context"


def test_ask_about_in_a_conversation_kbbot_cannot_read_is_refused_privately(bot):
    other_dm = dm_channel("U0SOMEONE1")  # a DM between two people: kbbot is not in it
    message = bot.fake.add_message(other_dm, EMPLOYEE, "How many vacation days do we get?")
    bot.fake.errors["conversations.replies"] = "channel_not_found"
    _, rid, _ = bot.send.message_shortcut(ASK_SHORTCUT_ID, EMPLOYEE, other_dm, message)
    refusal = wait_response(bot, rid)
    assert refusal["response_type"] == "ephemeral" and "can't read that conversation" in refusal["text"]
    bot.settle()
    assert not [c for c in bot.fake.calls if c.method.startswith(("chat.", "reactions."))]
    assert not bot.kbbot.records.answers_in(other_dm, message["ts"])


# --- Save to a knowledge base --------------------------------------------------------------------

PLANTS = "Who looks after the office plants?"
PLANTS_ANSWER = "Priya from facilities waters the office plants in the Berlin office every Tuesday morning."


def save(bot, user: str, channel: str, message: dict, kb: str, title: str) -> dict:
    """The shortcut, then the modal submitted with this KB and title; returns the view that was opened."""
    opened_before = len(bot.fake.calls_of("views.open"))
    response, _, trigger = bot.send.message_shortcut(SAVE_SHORTCUT_ID, user, channel, message)
    assert response.status == 200
    opened = bot.fake.wait_for(lambda: bot.fake.calls_of("views.open")[opened_before:], what="views.open")[0]
    assert opened.params["trigger_id"] == trigger
    view = opened.params["view"]
    values = {
        KB_BLOCK: {KB_ACTION: {"type": "static_select", "selected_option": {"value": kb}}},
        TITLE_BLOCK: {TITLE_ACTION: {"type": "plain_text_input", "value": title}},
    }
    response = bot.send.view_submission(view, user, values)
    assert response.status == 200 and response.body == ""
    return view


def test_save_thread_becomes_a_cited_document_and_resaving_replaces_it(bot):
    bot.fake.users = {
        EMPLOYEE: {"id": EMPLOYEE, "name": "sam", "profile": {"display_name": "Sam Okafor"}},
        HR_LEAD: {"id": HR_LEAD, "name": "hr", "profile": {"display_name": "", "real_name": "Hana Reyes"}},
    }
    parent = bot.fake.add_message(PEOPLE, EMPLOYEE, PLANTS)
    bot.fake.add_message(PEOPLE, HR_LEAD, PLANTS_ANSWER, thread_ts=parent["ts"])
    bot.fake.add_message(
        PEOPLE, BOT_USER, "kbbot's own earlier reply, drawn from the KBs", thread_ts=parent["ts"], bot_id=BOT_ID
    )
    reply = bot.fake.add_message(PEOPLE, "U0NONAME01", "Thanks, good to know", thread_ts=parent["ts"])

    view = save(bot, HR_LEAD, PEOPLE, reply, "people", "Office plants")
    assert view["callback_id"] == SAVE_CALLBACK_ID
    select = view["blocks"][0]["element"]
    assert {o["value"] for o in select["options"]} == {"people"}  # only KBs she may upload to
    assert view["blocks"][1]["element"]["initial_value"] == "Thanks, good to know"  # the message's first line
    report = bot.fake.wait_for(lambda: bot.fake.calls_of("chat.postEphemeral"), timeout=60, what="save report")[0]
    name = document_name(PEOPLE, parent["ts"])
    assert report.params["user"] == HR_LEAD and report.params["channel"] == PEOPLE
    assert f"`{name}` — ready" in report.params["text"]
    # The whole thread was read (from its parent), names resolved, its permalink asked for.
    assert any(c.params["ts"] == parent["ts"] for c in bot.fake.calls_of("conversations.replies"))
    assert {c.params["user"] for c in bot.fake.calls_of("users.info")} == {EMPLOYEE, HR_LEAD, "U0NONAME01"}
    [link] = bot.fake.calls_of("chat.getPermalink")
    assert link.params["channel"] == PEOPLE and link.params["message_ts"] == parent["ts"]

    text = live_text(bot, "people", name)
    assert "Sam Okafor" in text and "Hana Reyes" in text and "U0NONAME01" in text  # unknown user: the id
    assert PLANTS_ANSWER in text and "UTC" in text
    assert "kbbot's own earlier reply" not in text

    question, _ = bot.send.mention(PEOPLE, EMPLOYEE, "Who waters the office plants?")
    [answer] = wait_reply(bot, PEOPLE, question["ts"])
    assert "Priya" in reply_text(answer)
    assert permalink(PEOPLE, parent["ts"]) in reply_text(answer)  # citations link back to the thread

    # Saved again, under another title, after the thread moved on: the same document, new content.
    bot.fake.add_message(
        PEOPLE, HR_LEAD, "Update: from June the plants are watered on Thursdays instead.", thread_ts=parent["ts"]
    )
    save(bot, HR_LEAD, PEOPLE, parent, "people", "Plants (updated)")
    bot.fake.wait_for(lambda: len(bot.fake.calls_of("chat.postEphemeral")) >= 2, timeout=60, what="second report")
    [people] = [view for view in bot.kbbot.visible_kbs(Origin.cli()) if view.name == "people"]
    documents = [d.name for d in people.documents]
    assert documents.count(name) == 1
    assert "Thursdays instead" in live_text(bot, "people", name)


def test_a_non_uploader_cannot_save_a_thread(bot):
    parent = bot.fake.add_message(PEOPLE, EMPLOYEE, "Everyone gets 100 vacation days, right?")
    _, rid, _ = bot.send.message_shortcut(SAVE_SHORTCUT_ID, EMPLOYEE, PEOPLE, parent)
    refusal = wait_response(bot, rid)
    assert refusal["response_type"] == "ephemeral"
    assert "Only the uploaders of `people`" in refusal["text"] and "<@U0HRLEAD01>" in refusal["text"]
    assert not bot.fake.calls_of("views.open")
    # A forged submission is refused by the application layer too, inline, and nothing is read or saved.
    modal = {"callback_id": SAVE_CALLBACK_ID, "private_metadata": f'{{"channel": "{PEOPLE}", "thread_ts": "1.2"}}'}
    values = {
        KB_BLOCK: {KB_ACTION: {"type": "static_select", "selected_option": {"value": "people"}}},
        TITLE_BLOCK: {TITLE_ACTION: {"type": "plain_text_input", "value": "Vacation"}},
    }
    response = bot.send.view_submission(modal, EMPLOYEE, values)
    assert response.status == 200 and response.json()["response_action"] == "errors"
    assert "Only the uploaders of people" in response.json()["errors"][KB_BLOCK]
    bot.settle()
    assert not bot.fake.calls_of("conversations.replies") and not bot.fake.calls_of("chat.postEphemeral")
    assert document_name(PEOPLE, "1.2") not in {
        d.name for view in bot.kbbot.visible_kbs(Origin.cli()) for d in view.documents
    }


@pytest.mark.parametrize("title", ["", "   "])
def test_saving_needs_a_title(bot, title):
    modal = {"callback_id": SAVE_CALLBACK_ID, "private_metadata": f'{{"channel": "{PEOPLE}", "thread_ts": "1.3"}}'}
    values = {
        KB_BLOCK: {KB_ACTION: {"type": "static_select", "selected_option": {"value": "people"}}},
        TITLE_BLOCK: {TITLE_ACTION: {"type": "plain_text_input", "value": title}},
    }
    response = bot.send.view_submission(modal, HR_LEAD, values)
    assert response.json()["errors"] == {TITLE_BLOCK: "Give the document a title."}
