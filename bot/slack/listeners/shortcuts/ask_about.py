""" "Ask kbbot about this": the message is the question, its thread the history, the reply goes in its thread.

It goes through the same ask flow as a mention (`conversation.answer_question`), so the same channel rules
apply: in a channel the KBs readable there, in the person's DM with kbbot the KBs of the channels they are
in. kbbot must be able to read the conversation; where it cannot (a channel it is not in, a DM between
other people) it says so to the person alone and answers nothing.
"""

import logging

from slack_bolt import Ack, BoltContext, Respond
from slack_sdk import WebClient

from bot.slack.conversation import (
    BUSY,
    Question,
    StatusReporter,
    add_reaction,
    answer_question,
    fetch_replies,
    slack_error,
)
from bot.slack.deps import SlackDeps
from bot.slack.markup import clean_text
from bot.slack.shortcut_views import ALREADY_ASKED, CANNOT_READ, NO_TEXT
from bot.slack.work import fire_and_forget

log = logging.getLogger(__name__)


def question_of(body: dict, context: BoltContext) -> Question:
    message = body.get("message") or {}
    channel = (body.get("channel") or {}).get("id") or context.channel_id or ""
    ts = str(message.get("ts") or body.get("message_ts") or "")
    thread_ts = message.get("thread_ts")
    return Question(
        channel=channel,
        user=(body.get("user") or {}).get("id"),  # who asked: the rules follow them, not the message's author
        text=message.get("text") or "",
        ts=ts,
        thread_ts=thread_ts if thread_ts and thread_ts != ts else None,
        is_dm=channel.startswith("D"),  # readable by kbbot only if it is the person's DM with kbbot
        team=(body.get("team") or {}).get("id") or context.team_id,
        surface="shortcut",
        bot_user_id=context.bot_user_id,
        bot_id=context.bot_id,
    )


def handle_ask_about(deps: SlackDeps, ack: Ack, body: dict, client: WebClient, context: BoltContext, respond: Respond):
    ack()
    question = question_of(body, context)
    if not question.channel or not question.ts:
        respond(text=CANNOT_READ, response_type="ephemeral")
        return
    if not deps.answers.submit(ask_about_message, deps, client, question, respond):
        respond(text=BUSY, response_type="ephemeral")


def ask_about_message(deps: SlackDeps, client: WebClient, question: Question, respond: Respond) -> None:
    """On a worker: read the thread (also proving kbbot may read this conversation), claim, answer."""
    try:
        question.replies = fetch_replies(client, question.channel, question.reply_ts)
    except Exception as exc:
        log.info("shortcut on %s/%s: cannot read the thread (%s)", question.channel, question.ts, slack_error(exc))
        respond(text=CANNOT_READ, response_type="ephemeral")
        return
    text = clean_text(question.text)
    if not text:
        respond(text=NO_TEXT, response_type="ephemeral")
        return
    if not deps.ledger.claim(question.key):
        respond(text=ALREADY_ASKED, response_type="ephemeral")
        return
    deps.ledger.hold(question.key, question.to_payload())
    fire_and_forget(deps.side, add_reaction, client, question.channel, question.ts)
    status = StatusReporter(deps, client, question.channel, question.reply_ts)
    answer_question(deps, client, question, text, status)
