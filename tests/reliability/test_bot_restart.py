"""A bot killed (kill -9) or stopped (SIGTERM) while answering: every claimed question is answered exactly once.

`kbbot serve` runs as its own process against the fake Slack on 127.0.0.1. The fake can make one Web API
method hang, so a question is caught mid-answer (reading its DM history, or posting its reply) — the test
kills only after the fake has seen that call.
"""

from __future__ import annotations

import shutil
import signal
import time

import pytest
from helpers import figures
from helpers.fake_slack import FakeSlack
from helpers.slack_helpers import SlackSender, dm_channel
from helpers.slackbot import slack_settings_for, spawn_serve

PEOPLE, EMPLOYEE, HR_LEAD = "C0PEOPLE01", "U0EMPLOY01", "U0HRLEAD01"
QUESTION = "How many vacation days do full-time staff get per year?"


@pytest.fixture
def world(synced_data_dir, tmp_path):
    shutil.copytree(synced_data_dir, tmp_path / "data")
    fake = FakeSlack().start()
    settings = slack_settings_for(tmp_path / "data", fake.api_url, KBBOT_SLACK_STREAMING="off")
    yield settings, fake, tmp_path
    fake.unstall()
    fake.stop()


def finished_replies(fake: FakeSlack, channel: str, ts: str) -> list[dict]:
    return fake.bot_replies(channel, ts)


def test_kill_9_while_answering_then_restart_answers_each_question_once(world):
    settings, fake, workdir = world
    bot = spawn_serve(settings, workdir, KBBOT_SLACK_WARMUP="off")
    try:
        bot.wait_healthy()
        send = SlackSender(bot.url, fake)
        fake.stalled = {"chat.postMessage", "conversations.history"}
        mention, _ = send.mention(PEOPLE, EMPLOYEE, QUESTION)  # caught posting its reply
        dm, _ = send.dm(HR_LEAD, "How many paid sick days are there per year?")  # caught reading its history
        fake.wait_for(
            lambda: any(c.params.get("thread_ts") == mention["ts"] for c in fake.calls_of("chat.postMessage")),
            timeout=60,
            what="the mention's reply being posted",
        )
        fake.wait_for(
            lambda: any(c.params.get("channel") == dm_channel(HR_LEAD) for c in fake.calls_of("conversations.history")),
            timeout=60,
            what="the DM's history being read",
        )
    finally:
        bot.process.kill()  # kill -9
        bot.process.wait(timeout=30)
    fake.unstall()
    assert not finished_replies(fake, PEOPLE, mention["ts"]), "the kill landed before the reply was posted"

    again = spawn_serve(settings, workdir, port=bot.port, KBBOT_SLACK_WARMUP="off")
    try:
        again.wait_healthy()
        [reply] = fake.wait_for(
            lambda: finished_replies(fake, PEOPLE, mention["ts"]), timeout=90, what="the mention answered"
        )
        assert "25 days" in reply["text"] or "25" in str(reply["blocks"])
        fake.wait_for(lambda: finished_replies(fake, dm_channel(HR_LEAD), dm["ts"]), timeout=90, what="the DM answered")
        send = SlackSender(again.url, fake)
        send.event(
            {
                "type": "app_mention",
                "user": EMPLOYEE,
                "text": mention["text"],
                "ts": mention["ts"],
                "channel": PEOPLE,
                "event_ts": mention["ts"],
            },
            retry_num=1,
        )  # Slack's redelivery, after the restart
        time.sleep(3)  # anything that would answer twice has had time to
        assert len(finished_replies(fake, PEOPLE, mention["ts"])) == 1
        assert len(finished_replies(fake, dm_channel(HR_LEAD), dm["ts"])) == 1
    finally:
        again.process.terminate()
        again.process.wait(timeout=60)
    figures.add("faults_survived")
    figures.add("events_held", 2)


def test_sigterm_finishes_the_questions_already_claimed(world):
    settings, fake, workdir = world
    # The model loads only after the signal (no warm-up): on a busy machine that alone can take longer than
    # the default grace period, and the question would then (rightly) be left for the next start.
    bot = spawn_serve(settings, workdir, KBBOT_SLACK_WARMUP="off", KBBOT_SHUTDOWN_GRACE="150")
    bot.wait_healthy()
    send = SlackSender(bot.url, fake)
    fake.stalled = {"conversations.history"}
    dm, _ = send.dm(EMPLOYEE, QUESTION)
    fake.wait_for(lambda: fake.calls_of("conversations.history"), timeout=60, what="the DM being answered")
    bot.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert bot.process.poll() is None, "it waits for the question it claimed"
    fake.unstall()  # the history read fails; the question is answered without it
    assert bot.process.wait(timeout=180) == 0
    [reply] = finished_replies(fake, dm_channel(EMPLOYEE), dm["ts"])
    assert "25" in reply["text"] or "25" in str(reply["blocks"])
    # Nothing is left for the next start to answer again (what resume_held would read).
    from bot.slack.idempotency import ClaimLedger

    ledger = ClaimLedger(settings.resolved_data_dir / "slack" / "deliveries.sqlite3")
    try:
        assert ledger.held() == []
    finally:
        ledger.close()
    figures.add("faults_survived")
    figures.add("events_held")


def test_a_restart_answers_again_only_what_has_no_reply_and_says_so_when_too_late(world):
    """In-process: the held questions of an earlier run. One whose reply was posted (only the release was
    lost) is not answered again; one whose thread holds only a reply to another question is; one older than
    the limit gets a short note instead of a stale answer."""
    from helpers.fake_slack import BOT_ID, BOT_USER
    from helpers.slackbot import running_bot

    from bot.slack.conversation import Question
    from bot.slack.resume import TOO_LATE, resume_held

    settings, fake, _ = world

    def held(text: str) -> Question:
        asked = fake.add_message(PEOPLE, EMPLOYEE, text)
        question = Question(PEOPLE, EMPLOYEE, text, asked["ts"], None, False, None, "mention", BOT_USER, BOT_ID)
        bot.deps.ledger.hold(question.key, question.to_payload())
        return question

    def bot_reply(question: Question, text: str, metadata: dict) -> None:
        fake.add_message(PEOPLE, BOT_USER, text, thread_ts=question.ts, bot_id=BOT_ID, metadata=metadata)

    with running_bot(settings, fake, warm=False) as bot:
        answered, unanswered = held(QUESTION), held("How many paid sick days are there per year?")
        bot_reply(answered, "25 days [1]", answered.reply_metadata)
        bot_reply(unanswered, "the reply to another question", answered.reply_metadata)
        assert resume_held(bot.deps, bot.app.client) == 1
        replies = fake.wait_for(
            lambda: [m for m in fake.bot_replies(PEOPLE, unanswered.ts) if unanswered.answered_by(m)],
            timeout=60,
            what="the unanswered question answered",
        )
        assert len(replies) == 1 and "10" in str(replies[0])
        bot.settle()
        assert bot.deps.ledger.held() == [] and len(fake.bot_replies(PEOPLE, answered.ts)) == 1

        stale = held(QUESTION)
        assert resume_held(bot.deps, bot.app.client, max_age_s=0) == 0
        [note] = fake.bot_replies(PEOPLE, stale.ts)
        assert note["text"] == TOO_LATE and bot.deps.ledger.held() == []
