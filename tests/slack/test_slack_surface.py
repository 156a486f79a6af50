"""The Slack surface over real HTTP: signed requests into kbbot's endpoint, a fake Slack Web API behind it.

Every answer comes from the real engine over the sample KBs (offline mode).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

from helpers.fake_slack import BOT_ID, BOT_TOKEN, BOT_USER
from helpers.slack_helpers import dm_channel, unique

from bot.core import Origin

PEOPLE, ENG, FINANCE = "C0PEOPLE01", "C0ENG00001", "C0FINANCE1"
EMPLOYEE, HR_LEAD, CFO = "U0EMPLOY01", "U0HRLEAD01", "U0CFO00001"


def reply_text(message: dict) -> str:
    """Everything a person would read in a bot message: text plus all block text."""
    parts = [message.get("text") or ""]

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "text" and isinstance(value, str):
                    parts.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(message.get("blocks") or [])
    return "\n".join(parts)


def wait_reply(bot, channel: str, thread_ts: str, count: int = 1, timeout: float = 30.0) -> list[dict]:
    return bot.fake.wait_for(
        lambda: (r := bot.fake.bot_replies(channel, thread_ts)) and len(r) >= count and r,
        timeout=timeout,
        what=f"{count} bot repl(ies) in {channel}/{thread_ts}",
    )


def documents_of(bot, kb: str) -> set[str]:
    return {d.name for view in bot.kbbot.visible_kbs(Origin.cli()) if view.name == kb for d in view.documents}


def settle(bot, timeout: float = 10.0) -> None:
    bot.settle(timeout)


# --- conversations -----------------------------------------------------------------------------


def test_mention_gets_a_threaded_cited_answer(bot):
    message, response = bot.send.mention(PEOPLE, EMPLOYEE, "How many vacation days do full-time staff get per year?")
    assert response.status == 200
    assert response.elapsed_s < 1.0, f"ack took {response.elapsed_s:.3f}s"
    [reply] = wait_reply(bot, PEOPLE, message["ts"])
    text = reply_text(reply)
    assert "25 days" in text
    assert "[1]" in text
    assert "annual-and-sick-leave.md" in text  # Sources
    assert "people" in text and "offline" in text  # context line
    # progress: :eyes: on the question, then a status naming the KB being searched
    assert any(
        c.params.get("name") == "eyes" and c.params.get("timestamp") == message["ts"]
        for c in bot.fake.calls_of("reactions.add")
    )
    statuses = [c.params.get("status") for c in bot.fake.calls_of("assistant.threads.setStatus")]
    assert statuses and statuses[0].startswith("Searching")
    # streamed, with the feedback buttons at the bottom
    assert bot.fake.calls_of("chat.startStream") and bot.fake.calls_of("chat.stopStream")
    stop = bot.fake.calls_of("chat.stopStream")[-1].params
    assert any(b.get("type") == "context_actions" for b in stop.get("blocks") or [])
    assert all(c.token == BOT_TOKEN for c in bot.fake.calls)


def test_a_mention_with_no_words_gets_the_greeting(bot):
    message, _ = bot.send.mention(PEOPLE, EMPLOYEE, "<!here> ?!")
    [reply] = wait_reply(bot, PEOPLE, message["ts"])
    assert reply["text"].startswith("Hi! Ask me a question")
    assert not bot.kbbot.records.answers_in(PEOPLE, message["ts"])  # nothing was asked


def test_dm_is_answered_and_feedback_is_recorded(bot):
    message, response = bot.send.dm(
        EMPLOYEE, "I've been off sick for a few days - at what point do I need a doctor's note?"
    )
    assert response.status == 200
    channel = dm_channel(EMPLOYEE)
    [reply] = wait_reply(bot, channel, message["ts"])
    assert "3 consecutive sick days" in reply_text(reply)
    # Helpful / Not helpful → one durable JSON line with the question, the answer id and the user
    stop = bot.fake.calls_of("chat.stopStream")[-1].params
    [feedback] = [e for b in stop["blocks"] if b["type"] == "context_actions" for e in b["elements"]]
    value = feedback["negative_button"]["value"]
    response = bot.send.interaction(
        {
            "type": "block_actions",
            "user": {"id": EMPLOYEE},
            "team": {"id": "T0LUMEN001"},
            "api_app_id": "A0KBBOT0001",
            "channel": {"id": channel},
            "container": {"type": "message", "message_ts": reply["ts"], "channel_id": channel},
            "message": {"ts": reply["ts"], "thread_ts": message["ts"], "text": reply["text"]},
            "actions": [
                {
                    "type": "feedback_buttons",
                    "action_id": feedback["action_id"],
                    "block_id": "fb",
                    "value": value,
                    "action_ts": str(time.time()),
                }
            ],
            "trigger_id": unique("trig."),
            "response_url": f"{bot.fake.base}/response/{unique('R')}",
        }
    )
    assert response.status == 200
    bot.fake.wait_for(lambda: bot.fake.calls_of("chat.postEphemeral"), what="feedback thanks")
    answer_id = value.split(":", 1)[1]
    [record] = bot.fake.wait_for(lambda: bot.kbbot.records.feedback_for(answer_id), what="feedback recorded")
    assert record["value"] == "bad" and record["user"] == EMPLOYEE
    assert "doctor" in bot.kbbot.answer_record(answer_id)["question"]
    # a follow-up in the DM's thread is answered too, with the thread as context
    follow, _ = bot.send.dm(EMPLOYEE, "And how many paid sick days are there per year?", thread_ts=message["ts"])
    replies = wait_reply(bot, channel, message["ts"], count=2)
    assert "10 paid sick days" in reply_text(replies[-1])


def test_a_new_dm_message_continues_the_recent_dm_conversation(bot):
    channel = dm_channel(HR_LEAD)
    first, _ = bot.send.dm(HR_LEAD, "How much fully paid time off does the primary caregiver get when a baby arrives?")
    wait_reply(bot, channel, first["ts"])
    second, _ = bot.send.dm(HR_LEAD, "And what about the secondary caregiver?")  # top level, not in the thread
    [reply] = wait_reply(bot, channel, second["ts"])
    assert "6 weeks" in reply_text(reply)
    assert any(c.params.get("channel") == channel for c in bot.fake.calls_of("conversations.history"))
    [record] = bot.kbbot.records.answers_in(channel, second["ts"])
    assert "baby" in record["standalone_query"]  # the earlier question (and its answer) came from Slack


def test_thread_follow_up_without_mention_uses_history_from_slack(bot):
    first, _ = bot.send.mention(
        PEOPLE, EMPLOYEE, "How much fully paid time off does the primary caregiver get when a baby arrives?"
    )
    wait_reply(bot, PEOPLE, first["ts"])
    follow, response = bot.send.message(
        PEOPLE, EMPLOYEE, "And what about the secondary caregiver?", thread_ts=first["ts"]
    )
    assert response.status == 200
    replies = wait_reply(bot, PEOPLE, first["ts"], count=2)
    assert "6 weeks" in reply_text(replies[-1])
    assert any(c.params.get("ts") == first["ts"] for c in bot.fake.calls_of("conversations.replies"))
    record = bot.kbbot.records.answers_in(PEOPLE, first["ts"])[-1]
    assert record["question"] == "And what about the secondary caregiver?"
    assert "baby" in record["standalone_query"]  # the condensed query drew on the thread's history


def test_thread_reply_where_the_bot_never_answered_is_ignored(bot):
    parent = bot.fake.add_message(PEOPLE, EMPLOYEE, "lunch anyone?")
    message, response = bot.send.message(PEOPLE, HR_LEAD, "How many vacation days do we get?", thread_ts=parent["ts"])
    assert response.status == 200
    bot.fake.wait_for(lambda: bot.fake.calls_of("conversations.replies"), what="the thread check")
    settle(bot)
    assert not bot.fake.bot_replies(PEOPLE) and not bot.fake.calls_of("reactions.add")
    assert bot.deps.ledger.claim(f"message:{PEOPLE}:{message['ts']}"), "nobody claimed the message to answer it"


def test_redelivered_event_is_answered_once(bot):
    message = bot.fake.add_message(
        PEOPLE, EMPLOYEE, f"<@{BOT_USER}> How many vacation days do full-time staff get per year?"
    )
    event = {
        "type": "app_mention",
        "user": EMPLOYEE,
        "text": message["text"],
        "ts": message["ts"],
        "channel": PEOPLE,
        "event_ts": message["ts"],
    }
    event_id = unique("Ev")
    before = bot.deps.answers.submitted
    assert bot.send.event(event, event_id=event_id).status == 200
    with ThreadPoolExecutor(3) as pool:  # Slack's retries (same event_id), one of them racing the first
        statuses = list(pool.map(lambda n: bot.send.event(event, event_id=event_id, retry_num=n).status, [1, 2, 3]))
    assert statuses == [200, 200, 200]
    wait_reply(bot, PEOPLE, message["ts"])
    settle(bot)
    assert len(bot.fake.bot_replies(PEOPLE, message["ts"])) == 1
    assert bot.deps.answers.submitted == before + 1


def test_a_mention_in_a_dm_thread_arrives_twice_and_is_answered_once(bot):
    """Slack sends a mention in a DM (or a thread) as `app_mention` and as `message`, with different
    event ids: only the claim on the message itself keeps it to one answer."""
    channel = dm_channel(EMPLOYEE)
    parent, _ = bot.send.dm(EMPLOYEE, "How many vacation days do full-time staff get per year?")
    wait_reply(bot, channel, parent["ts"])
    message = bot.fake.add_message(
        channel, EMPLOYEE, f"<@{BOT_USER}> and how many paid sick days?", thread_ts=parent["ts"]
    )
    base = {
        "user": EMPLOYEE,
        "text": message["text"],
        "ts": message["ts"],
        "thread_ts": parent["ts"],
        "channel": channel,
        "channel_type": "im",
        "event_ts": message["ts"],
    }
    with ThreadPoolExecutor(2) as pool:
        statuses = list(
            pool.map(lambda kind: bot.send.event({**base, "type": kind}).status, ["app_mention", "message"])
        )
    assert statuses == [200, 200]
    replies = wait_reply(bot, channel, parent["ts"], count=2)
    settle(bot)
    assert len(bot.fake.bot_replies(channel, parent["ts"])) == len(replies) == 2  # the first answer and this one
    assert "10 paid sick days" in reply_text(replies[-1])


def test_bad_signature_and_stale_timestamp_are_rejected(bot):
    event = {"type": "app_mention", "user": EMPLOYEE, "text": f"<@{BOT_USER}> hi", "ts": "1.000001", "channel": PEOPLE}
    body = json.dumps(bot.send.envelope(event))
    forged = bot.send.post(
        body,
        "application/json",
        signed=False,
        headers={"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=" + "0" * 64},
    )
    assert forged.status == 401
    stale = bot.send.post(
        body, "application/json", timestamp=int(time.time()) - 600
    )  # correctly signed, 10 minutes old
    assert stale.status == 401
    unsigned = bot.send.post(body, "application/json", signed=False)
    assert unsigned.status == 401
    challenge = bot.send.post(
        json.dumps({"type": "url_verification", "challenge": "c-123", "token": "x"}), "application/json"
    )
    assert challenge.status == 200 and "c-123" in challenge.body
    assert not [c for c in bot.fake.calls if c.method != "auth.test"]


def test_own_and_other_bot_messages_are_ignored(bot):
    before = bot.deps.answers.submitted
    channel = dm_channel(EMPLOYEE)
    own = bot.send.event(
        {
            "type": "message",
            "channel": channel,
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "text": "25 days [1]",
            "ts": bot.fake.next_ts(),
            "channel_type": "im",
        }
    )
    other = bot.send.event(
        {
            "type": "message",
            "subtype": "bot_message",
            "channel": channel,
            "bot_id": "B0OTHER001",
            "text": "How many vacation days?",
            "ts": bot.fake.next_ts(),
            "channel_type": "im",
        }
    )
    edited = bot.send.event(
        {
            "type": "message",
            "subtype": "message_changed",
            "channel": channel,
            "channel_type": "im",
            "message": {"text": "How many vacation days?", "user": EMPLOYEE},
            "ts": bot.fake.next_ts(),
        }
    )
    assert [own.status, other.status, edited.status] == [200, 200, 200]
    settle(bot)  # Bolt's listener threads included: each event has been handled, not just acknowledged
    assert bot.deps.answers.submitted == before
    assert not [c for c in bot.fake.calls if c.method.startswith(("chat.", "reactions."))]


def test_restricted_kb_is_cited_only_where_allowed(bot):
    question = "What is the Q3 FY2027 revenue target?"
    finance_member, outsider = CFO, EMPLOYEE
    asks = {
        "engineering channel": bot.send.mention(ENG, EMPLOYEE, question)[0],
        "finance channel": bot.send.mention(FINANCE, CFO, question)[0],
        "DM of a finance member": bot.send.dm(finance_member, question)[0],
        "DM of an outsider": bot.send.dm(outsider, question)[0],
    }
    channels = {
        "engineering channel": ENG,
        "finance channel": FINANCE,
        "DM of a finance member": dm_channel(finance_member),
        "DM of an outsider": dm_channel(outsider),
    }
    texts = {name: reply_text(wait_reply(bot, channels[name], m["ts"])[0]) for name, m in asks.items()}
    records = {m["ts"]: bot.kbbot.records.answers_in(channels[name], m["ts"])[-1] for name, m in asks.items()}
    cited = {name: {c["kb"] for c in records[m["ts"]]["citations"]} for name, m in asks.items()}
    assert cited["finance channel"] == {"finance"} and "$21.6M" in texts["finance channel"]
    assert cited["DM of a finance member"] == {"finance"}
    for name in ("engineering channel", "DM of an outsider"):
        assert "finance" not in cited[name] and "finance" not in records[asks[name]["ts"]]["kbs"], name
        assert "21.6" not in texts[name] and "revenue-targets" not in texts[name], name
    # the insufficient-context reply looks different: a "not in the knowledge bases" heading, no Sources
    assert records[asks["engineering channel"]["ts"]]["status"] == "insufficient_context"
    assert (
        "don't have enough to answer" in texts["engineering channel"] and "Sources" not in texts["engineering channel"]
    )
    assert any(c.params.get("channel") == "C0FINANCE1" for c in bot.fake.calls_of("conversations.members"))


def test_streaming_unavailable_falls_back_to_post_message_and_honours_429(bot):
    bot.fake.errors["chat.startStream"] = "not_allowed"
    bot.fake.rate_limit["chat.postMessage"] = 1  # the first attempt gets a 429 with Retry-After: 1
    message, _ = bot.send.mention(PEOPLE, EMPLOYEE, "What's the max I can spend per night on a hotel in London?")
    [reply] = wait_reply(bot, PEOPLE, message["ts"])
    text = reply_text(reply)
    assert "$260" in text and "Sources" in text and "expenses-and-reimbursement.pdf" in text
    assert any(b["type"] == "context_actions" for b in reply["blocks"])
    posts = bot.fake.calls_of("chat.postMessage")
    assert len(posts) == 2 and posts[1].at - posts[0].at >= 0.9  # retried after Retry-After
    assert not bot.deps.streaming.enabled


# --- /kb ---------------------------------------------------------------------------------------


def test_kb_help_and_list(bot):
    response, _, _ = bot.send.command("help", EMPLOYEE, PEOPLE)
    assert response.status == 200 and "/kb upload" in response.body
    response, rid, _ = bot.send.command("list", EMPLOYEE, PEOPLE)
    assert response.status == 200 and response.elapsed_s < 1.0
    [listing] = bot.fake.wait_for(lambda: bot.send.responses(rid), what="/kb list response")
    text = reply_text(listing)
    assert listing["response_type"] == "ephemeral"
    for kb in ("people", "engineering", "product"):
        assert f"*{kb}*" in text
    assert "*finance*" not in text and "revenue-targets-fy2027.md" not in text
    assert "annual-and-sick-leave.md" in text
    _, rid, _ = bot.send.command("list", CFO, FINANCE)
    [listing] = bot.fake.wait_for(lambda: bot.send.responses(rid), what="/kb list in #finance")
    assert "*finance*" in reply_text(listing) and "revenue-targets-fy2027.md" in reply_text(listing)


def test_kb_ask_answers_ephemerally(bot):
    response, rid, _ = bot.send.command("ask How many vacation days do full-time staff get per year?", EMPLOYEE, PEOPLE)
    assert response.status == 200 and "Searching" in response.body
    [answer] = bot.fake.wait_for(lambda: bot.send.responses(rid), what="/kb ask response")
    assert answer["response_type"] == "ephemeral" and "25 days" in reply_text(answer)


def upload_submission(view: dict, user: str, kb: str, files: list[dict]) -> dict:
    return {
        "type": "view_submission",
        "team": {"id": "T0LUMEN001"},
        "user": {"id": user, "team_id": "T0LUMEN001"},
        "api_app_id": "A0KBBOT0001",
        "trigger_id": unique("trig."),
        "view": {
            "id": view.get("id", "V1"),
            "type": "modal",
            "callback_id": view["callback_id"],
            "private_metadata": view.get("private_metadata", ""),
            "team_id": "T0LUMEN001",
            "state": {
                "values": {
                    "kb": {
                        "kb_select": {
                            "type": "static_select",
                            "selected_option": {"value": kb, "text": {"type": "plain_text", "text": kb}},
                        }
                    },
                    "files": {"kb_files": {"type": "file_input", "files": files}},
                }
            },
        },
    }


OFFICE_DOG = b"""# Office pets

The Lumen Freight office dog is called Biscuit. Biscuit is a golden retriever who visits the London office every Friday.
Please do not feed Biscuit from the kitchen; treats are kept at reception.
"""


def test_kb_upload_modal_downloads_ingests_and_answers_from_the_file(bot):
    response, rid, trigger = bot.send.command("upload people", HR_LEAD, PEOPLE)
    assert response.status == 200
    [opened] = bot.fake.wait_for(lambda: bot.fake.calls_of("views.open"), what="views.open")
    assert opened.params["trigger_id"] == trigger
    view = opened.params["view"]
    select = view["blocks"][0]["element"]
    assert select["initial_option"]["value"] == "people"
    assert {o["value"] for o in select["options"]} == {"people"}  # only KBs this user may upload to
    assert view["blocks"][1]["element"]["type"] == "file_input" and "md" in view["blocks"][1]["element"]["filetypes"]

    name = f"office-pets-{unique('')}.md"
    good = bot.fake.add_file(name, OFFICE_DOG)
    big = bot.fake.add_file("huge-scan.pdf", b"%PDF-1.4", size=40 * 1024 * 1024, mimetype="application/pdf")
    response = bot.send.interaction(upload_submission(view, HR_LEAD, "people", [good, big]))
    assert response.status == 200 and response.body == ""
    [report] = bot.fake.wait_for(lambda: bot.fake.calls_of("chat.postEphemeral"), timeout=60, what="upload report")
    assert report.params["user"] == HR_LEAD and report.params["channel"] == PEOPLE
    assert f"`{name}` — ready" in report.params["text"]
    assert "`huge-scan.pdf` — refused: 40.0 MB is over the 25.0 MB upload limit" in report.params["text"]
    downloads = [path for path, auth in bot.fake.downloads if auth == f"Bearer {BOT_TOKEN}"]
    assert len(downloads) == 1 and downloads[0].endswith(name)  # the oversize file was never downloaded

    message, _ = bot.send.mention(PEOPLE, EMPLOYEE, "What is the office dog called?")
    [reply] = wait_reply(bot, PEOPLE, message["ts"])
    text = reply_text(reply)
    assert "Biscuit" in text and name in text
    assert good["permalink"] in text  # Sources link to the Slack file

    _, rid, _ = bot.send.command(f"delete people {name}", HR_LEAD, PEOPLE)
    [deleted] = bot.fake.wait_for(lambda: bot.send.responses(rid), what="/kb delete response")
    assert "Deleted" in deleted["text"]
    assert name not in documents_of(bot, "people")


def test_non_uploaders_and_bad_files_are_refused_before_download(bot):
    _, rid, _ = bot.send.command("upload people", EMPLOYEE, PEOPLE)
    [refused] = bot.fake.wait_for(lambda: bot.send.responses(rid), what="refusal")
    assert "Only the uploaders of `people`" in refused["text"] and "<@U0HRLEAD01>" in refused["text"]
    _, rid, _ = bot.send.command("upload", EMPLOYEE, PEOPLE)
    [refused] = bot.fake.wait_for(lambda: bot.send.responses(rid), what="refusal")
    assert "aren't an uploader" in refused["text"]
    _, rid, _ = bot.send.command("delete people annual-and-sick-leave.md", EMPLOYEE, PEOPLE)
    [refused] = bot.fake.wait_for(lambda: bot.send.responses(rid), what="delete refusal")
    assert "Only the uploaders of `people`" in refused["text"]
    assert "annual-and-sick-leave.md" in documents_of(bot, "people")
    assert not bot.fake.calls_of("views.open")

    modal = {"callback_id": "kb_upload", "private_metadata": json.dumps({"channel": PEOPLE})}
    doc = bot.fake.add_file("sneaky.md", b"# Sneaky\n\nEveryone gets 100 vacation days.\n")
    response = bot.send.interaction(upload_submission(modal, EMPLOYEE, "people", [doc]))
    assert response.status == 200 and response.json()["response_action"] == "errors"
    assert "kb" in response.json()["errors"]
    exe = bot.fake.add_file("setup.exe", b"MZ", mimetype="application/octet-stream")
    big = bot.fake.add_file("scan.pdf", b"%PDF", size=26 * 1024 * 1024, mimetype="application/pdf")
    response = bot.send.interaction(upload_submission(modal, HR_LEAD, "people", [exe, big]))
    errors = response.json()["errors"]["files"]
    assert "unsupported file type .exe" in errors and "over the 25.0 MB upload limit" in errors
    settle(bot, timeout=0.5)
    assert not bot.fake.downloads


def test_files_dropped_in_a_dm_are_ingested_after_choosing_the_kb(bot):
    name = f"desk-booking-{unique('')}.md"
    meta = bot.fake.add_file(
        name, b"# Desk booking\n\nDesks in the Berlin office are booked with the Deskly app, up to 14 days ahead.\n"
    )
    channel = dm_channel(HR_LEAD)
    message, response = bot.send.dm(HR_LEAD, "here's a new doc", subtype="file_share", files=[meta])
    assert response.status == 200
    [question] = wait_reply(bot, channel, message["ts"])
    buttons = [e for b in question["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert [b["text"]["text"] for b in buttons] == ["people"]  # only the KBs this user may upload to
    response = bot.send.interaction(
        {
            "type": "block_actions",
            "user": {"id": HR_LEAD},
            "team": {"id": "T0LUMEN001"},
            "api_app_id": "A0KBBOT0001",
            "channel": {"id": channel},
            "container": {"type": "message", "message_ts": question["ts"], "channel_id": channel},
            "message": {"ts": question["ts"], "thread_ts": message["ts"], "text": question["text"]},
            "actions": [
                {
                    "type": "button",
                    "action_id": buttons[0]["action_id"],
                    "block_id": "b",
                    "value": buttons[0]["value"],
                    "action_ts": str(time.time()),
                }
            ],
            "trigger_id": unique("trig."),
            "response_url": f"{bot.fake.base}/response/{unique('R')}",
        }
    )
    assert response.status == 200
    replies = wait_reply(bot, channel, message["ts"], count=2, timeout=60)
    assert f"`{name}` — ready" in replies[-1]["text"]
    assert bot.fake.calls_of("files.info")  # the button carried only file ids
    assert name in documents_of(bot, "people")


def test_files_dropped_in_a_dm_naming_a_kb_the_user_cannot_upload_to_are_refused(bot):
    meta = bot.fake.add_file("plan.md", b"# Plan\n\nSecret plan.\n")
    message, _ = bot.send.dm(EMPLOYEE, "add this to people", subtype="file_share", files=[meta])
    [reply] = wait_reply(bot, dm_channel(EMPLOYEE), message["ts"])
    assert "aren't an uploader" in reply["text"]
    # A restricted KB the HR lead may not read is not named back, nor are its uploaders: she is offered her own.
    message, _ = bot.send.dm(HR_LEAD, "add this to finance", subtype="file_share", files=[meta])
    [reply] = wait_reply(bot, dm_channel(HR_LEAD), message["ts"])
    shown = reply_text(reply)
    assert "finance" not in shown.lower() and "U0CFO00001" not in shown
    assert [e["text"]["text"] for b in reply["blocks"] if b["type"] == "actions" for e in b["elements"]] == ["people"]
    # A public KB she may read but not change: refused, naming who can.
    message, _ = bot.send.dm(HR_LEAD, "add this to engineering", subtype="file_share", files=[meta])
    [reply] = wait_reply(bot, dm_channel(HR_LEAD), message["ts"])
    assert "Only the uploaders of `engineering`" in reply["text"]
    assert not bot.fake.downloads
