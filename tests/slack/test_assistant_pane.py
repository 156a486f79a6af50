"""Slack's assistant pane and "nothing silently ignored", over real signed requests against the fake Web API.

Every answer comes from the real engine over the sample KBs (offline mode). The finance KB is restricted to
C0FINANCE1, whose members (in the fake) are the CFO, an admin and a finance person — not the employee.
"""

from __future__ import annotations

from helpers.fake_slack import BOT_USER
from helpers.slack_helpers import dm_channel
from test_slack_manifest import METHOD_SCOPES, manifest_scopes
from test_slack_surface import reply_text

from bot.slack.builders import FILES_NOT_READ, HELP
from bot.slack.conversation import GREETING_EVENT, REPLY_EVENT
from bot.slack.listeners.commands.kb import UPLOAD_FORM_FAILED

PEOPLE, FINANCE, PRODUCT = "C0PEOPLE01", "C0FINANCE1", "C0PRODUCT1"
EMPLOYEE, CFO = "U0EMPLOY01", "U0CFO00001"
FINANCE_QUESTION = "What's the revenue target for Q3 of FY2027?"
FINANCE_TOPICS = ("revenue", "fundraising", "budget", "board", "fy2027")


def wait_reply(bot, channel: str, thread_ts: str, count: int = 1, timeout: float = 30.0) -> list[dict]:
    """The bot's answers in a thread (its greeting and one-line notices are not answers)."""

    def answers():
        replies = bot.fake.bot_replies(channel, thread_ts)
        found = [m for m in replies if (m.get("metadata") or {}).get("event_type") == REPLY_EVENT]
        return len(found) >= count and found

    found = bot.fake.wait_for(answers, timeout=timeout, what=f"{count} answer(s) in {channel}/{thread_ts}")
    bot.settle()
    return found


def start_pane(bot, user: str, context_channel: str | None) -> tuple[str, str]:
    channel, thread_ts, response = bot.send.pane_thread_started(user, context_channel)
    assert response.status == 200
    bot.fake.wait_for(lambda: bot.fake.calls_of("chat.postMessage"), what="the pane greeting")
    bot.settle()
    return channel, thread_ts


def greeting_of(bot, channel: str, thread_ts: str) -> dict:
    [greeting] = [
        c.params
        for c in bot.fake.calls_of("chat.postMessage")
        if c.params.get("channel") == channel and c.params.get("thread_ts") == thread_ts
    ]
    return greeting


def prompts_of(bot, channel: str, thread_ts: str) -> list[dict]:
    calls = [
        c.params
        for c in bot.fake.calls_of("assistant.threads.setSuggestedPrompts")
        if c.params.get("channel_id") == channel and c.params.get("thread_ts") == thread_ts
    ]
    assert len(calls) <= 1
    return calls[0]["prompts"] if calls else []


def mentions_finance(text: str) -> bool:
    return "finance" in text.lower() or any(t in text.lower() for t in FINANCE_TOPICS)


# --- thread start: greeting and suggested prompts ------------------------------------------------------------


def test_thread_start_greets_and_suggests_prompts_from_the_viewed_channels_kbs_first(bot):
    channel, thread_ts = start_pane(bot, CFO, FINANCE)
    greeting = greeting_of(bot, channel, thread_ts)
    assert greeting["text"].startswith("Hi!") and f"<#{FINANCE}>" in greeting["text"]
    assert "*finance* first" in greeting["text"]
    assert greeting["metadata"]["event_type"] == GREETING_EVENT
    [call] = bot.fake.calls_of("assistant.threads.setSuggestedPrompts")
    assert call.params["title"] == "Ask the knowledge bases"
    prompts = call.params["prompts"]
    assert 1 <= len(prompts) <= 4 and all(set(p) == {"title", "message"} for p in prompts)
    assert "finance documents" in prompts[0]["message"], "the viewed channel's KB comes first"
    assert {"engineering", "people", "product"} <= {p["message"].split()[3] for p in prompts}


def test_a_restricted_kb_is_not_offered_to_someone_outside_its_channel(bot):
    channel, thread_ts = start_pane(bot, EMPLOYEE, FINANCE)  # looking at #finance, not a member of it
    greeting = greeting_of(bot, channel, thread_ts)["text"]
    prompts = prompts_of(bot, channel, thread_ts)
    assert prompts and not any(mentions_finance(p["title"] + p["message"]) for p in prompts)
    assert "finance" not in greeting.replace(f"<#{FINANCE}>", "") and "first" not in greeting
    # …and asking anyway answers from the KBs the employee may read only
    message, _ = bot.send.pane_message(EMPLOYEE, thread_ts, FINANCE_QUESTION)
    [reply] = wait_reply(bot, channel, thread_ts)
    assert "21.6" not in reply_text(reply) and "revenue-targets-fy2027.md" not in reply_text(reply)
    statuses = [c.params for c in bot.fake.calls_of("assistant.threads.setStatus")]
    assert statuses and not any("finance" in " ".join(s.get("loading_messages") or []) for s in statuses)


def test_a_failed_membership_lookup_offers_and_searches_no_restricted_kb(bot):
    bot.fake.errors["conversations.members"] = "internal_error"
    channel, thread_ts = start_pane(bot, CFO, FINANCE)  # a member, but Slack cannot say so now
    assert bot.fake.calls_of("conversations.members")
    prompts = prompts_of(bot, channel, thread_ts)
    assert prompts and not any(mentions_finance(p["title"] + p["message"]) for p in prompts)
    bot.send.pane_message(CFO, thread_ts, FINANCE_QUESTION)
    [reply] = wait_reply(bot, channel, thread_ts)
    assert "21.6" not in reply_text(reply)
    assert "internal_error" not in reply_text(reply) + greeting_of(bot, channel, thread_ts)["text"]


# --- questions in the pane ---------------------------------------------------------------------------------


def test_a_pane_question_gets_a_title_a_status_naming_the_kb_and_the_cited_answer(bot):
    channel, thread_ts = start_pane(bot, EMPLOYEE, PEOPLE)
    bot.fake.calls.clear()
    message, response = bot.send.pane_message(
        EMPLOYEE, thread_ts, "How many vacation days do full-time staff get per year?"
    )
    assert response.status == 200 and response.elapsed_s < 1.0
    [reply] = wait_reply(bot, channel, thread_ts)
    text = reply_text(reply)
    assert "25 days" in text and "[1]" in text and "annual-and-sick-leave.md" in text
    statuses = [c.params for c in bot.fake.calls_of("assistant.threads.setStatus")]
    assert all(s["channel_id"] == channel and s["thread_ts"] == thread_ts for s in statuses)
    assert any(s.get("loading_messages") == ["Searching people…"] for s in statuses), statuses
    [title] = bot.fake.calls_of("assistant.threads.setTitle")
    assert title.params["thread_ts"] == thread_ts and "vacation days" in title.params["title"]
    assert len(title.params["title"]) <= 80
    # the same answer as elsewhere: streamed into the pane thread, with the feedback buttons
    start = bot.fake.calls_of("chat.startStream")[-1].params
    assert start["channel"] == channel and start["thread_ts"] == thread_ts
    assert start["recipient_user_id"] == EMPLOYEE
    assert any(b.get("type") == "context_actions" for b in bot.fake.calls_of("chat.stopStream")[-1].params["blocks"])
    assert not bot.fake.calls_of("reactions.add"), "the pane shows its status instead of :eyes:"
    record = bot.kbbot.records.answers_in(channel, thread_ts)
    assert record, "recorded like any answer (feedback, traces)"

    # a follow-up keeps the thread's history (the greeting is not a turn)
    bot.fake.calls.clear()
    bot.send.pane_message(EMPLOYEE, thread_ts, "And how many paid sick days are there per year?")
    replies = wait_reply(bot, channel, thread_ts, count=2)
    assert "10 paid sick days" in reply_text(replies[-1])
    [title] = bot.fake.calls_of("assistant.threads.setTitle")
    assert "sick days" in title.params["title"]


def test_a_changed_context_channel_is_searched_first_from_then_on(bot):
    channel, thread_ts = start_pane(bot, EMPLOYEE, PEOPLE)
    assert bot.send.pane_context_changed(EMPLOYEE, thread_ts, PRODUCT).status == 200
    bot.settle()
    bot.fake.calls.clear()
    bot.send.pane_message(EMPLOYEE, thread_ts, "How long is an OAuth access token valid for the API?")
    [reply] = wait_reply(bot, channel, thread_ts)
    assert "api-reference.pdf" in reply_text(reply)
    loading = [c.params.get("loading_messages") for c in bot.fake.calls_of("assistant.threads.setStatus")]
    assert ["Searching product…"] in loading, loading


def test_the_pane_reads_the_viewed_restricted_kb_for_its_members(bot):
    channel, thread_ts = start_pane(bot, CFO, FINANCE)
    bot.send.pane_message(CFO, thread_ts, FINANCE_QUESTION)
    [reply] = wait_reply(bot, channel, thread_ts)
    assert "21.6" in reply_text(reply) and "revenue-targets-fy2027.md" in reply_text(reply)


def test_a_dm_thread_that_is_not_a_pane_thread_keeps_the_dm_flow(bot):
    channel = dm_channel(EMPLOYEE)
    first, _ = bot.send.dm(EMPLOYEE, "How many vacation days do full-time staff get per year?")
    wait_reply(bot, channel, first["ts"])
    bot.send.dm(EMPLOYEE, "And how many paid sick days are there per year?", thread_ts=first["ts"])
    replies = wait_reply(bot, channel, first["ts"], count=2)
    assert "10 paid sick days" in reply_text(replies[-1])
    titles = [c for c in bot.fake.calls_of("assistant.threads.setTitle") if c.params.get("channel_id") == channel]
    assert not titles, "a DM thread is not titled like a pane thread"
    assert any(c.params.get("timestamp") == first["ts"] for c in bot.fake.calls_of("reactions.add"))


# --- nothing silently ignored -------------------------------------------------------------------------------


def file_payload(bot, name: str = "notes.md") -> dict:
    return bot.fake.add_file(name, b"# Notes\nSomething to read.")


def notices(bot, channel: str, thread_ts: str) -> list[dict]:
    return [
        c.params
        for c in bot.fake.calls_of("chat.postMessage")
        if c.params.get("channel") == channel
        and c.params.get("thread_ts") == thread_ts
        and c.params.get("text") == FILES_NOT_READ
    ]


def test_a_pane_question_with_a_file_is_told_attachments_are_not_read_and_answered(bot):
    channel, thread_ts = start_pane(bot, EMPLOYEE, PEOPLE)
    file = file_payload(bot)
    bot.send.pane_message(
        EMPLOYEE,
        thread_ts,
        "How many vacation days do full-time staff get per year?",
        subtype="file_share",
        files=[file],
    )
    [answer] = wait_reply(bot, channel, thread_ts)
    assert len(notices(bot, channel, thread_ts)) == 1
    assert "/kb upload" in FILES_NOT_READ
    assert "25 days" in reply_text(answer)
    assert not bot.fake.downloads and not bot.fake.calls_of("files.info"), "the file is not read"


def test_a_mention_with_a_file_gets_one_notice_and_one_answer(bot):
    file = file_payload(bot)
    # Slack may send the mention with a file as a `message` (file_share) event, an `app_mention`, or both
    text = f"<@{BOT_USER}> How many vacation days do full-time staff get per year?"
    message = bot.fake.add_message(PEOPLE, EMPLOYEE, text, subtype="file_share", files=[file])
    bot.send.event(
        {
            "type": "app_mention",
            "user": EMPLOYEE,
            "text": message["text"],
            "ts": message["ts"],
            "channel": PEOPLE,
            "event_ts": message["ts"],
            "files": [file],
        }
    )
    bot.send.event(
        {
            "type": "message",
            "subtype": "file_share",
            "channel": PEOPLE,
            "channel_type": "channel",
            "user": EMPLOYEE,
            "text": message["text"],
            "ts": message["ts"],
            "event_ts": message["ts"],
            "files": [file],
        }
    )
    [answer] = wait_reply(bot, PEOPLE, message["ts"])  # both deliveries: claimed once
    assert "25 days" in reply_text(answer)
    assert len(notices(bot, PEOPLE, message["ts"])) == 1
    assert len(bot.fake.bot_replies(PEOPLE, message["ts"])) == 2  # the notice and the answer, nothing else
    assert not bot.fake.downloads


def test_a_file_share_mention_arriving_only_as_a_message_event_is_answered_with_the_notice(bot):
    file = file_payload(bot)
    text = f"<@{BOT_USER}> How many vacation days do full-time staff get per year?"
    message, _ = bot.send.message(PEOPLE, EMPLOYEE, text, subtype="file_share", files=[file])
    [answer] = wait_reply(bot, PEOPLE, message["ts"])
    assert len(notices(bot, PEOPLE, message["ts"])) == 1
    assert "25 days" in reply_text(answer)


def test_an_unknown_kb_subcommand_gets_the_help(bot):
    response, _, _ = bot.send.command("frobnicate now", EMPLOYEE, PEOPLE)
    assert response.status == 200
    text = response.body
    assert "I don't know `/kb frobnicate`" in text and HELP in text and "assistant pane" in text


def test_a_failed_upload_form_shows_no_slack_error_text(bot):
    bot.fake.errors["views.open"] = "expired_trigger_id"
    response, response_id, _ = bot.send.command("upload people", "U0HRLEAD01", PEOPLE)
    assert response.status == 200
    [reply] = bot.fake.wait_for(lambda: bot.send.responses(response_id), what="the refusal")
    assert reply["text"] == UPLOAD_FORM_FAILED and "expired_trigger_id" not in reply["text"]


def test_every_method_called_in_this_module_needs_only_declared_scopes(bot):
    """Runs last: the methods the fake received across this module's representative run (thread starts,
    questions, follow-ups, files, commands) are all in the scope map, and the manifest declares their scopes."""
    seen = bot.fake.methods_seen
    assert {"assistant.threads.setSuggestedPrompts", "assistant.threads.setTitle", "chat.startStream"} <= seen
    assert not seen - set(METHOD_SCOPES), seen - set(METHOD_SCOPES)
    assert all(METHOD_SCOPES[m] <= manifest_scopes() for m in seen)
