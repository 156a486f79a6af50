"""At start-up: answer the questions an earlier run claimed and never answered (it was killed, or stopped
before its grace period ran out), exactly once.

A question is answered again only if its thread holds no reply of the bot to it (each reply carries the
question's ts in its Slack message metadata; the earlier run may have died between posting and releasing).
One older than `MAX_AGE_S` is not answered any more: its asker gets a short note instead.
"""

from __future__ import annotations

import logging
import time

from slack_sdk import WebClient

from bot.slack.conversation import (
    Question,
    answer_question,
    fetch_replies,
    post_quietly,
    say_busy,
    slack_error,
    status_for,
)
from bot.slack.deps import SlackDeps
from bot.slack.markup import clean_text

log = logging.getLogger(__name__)

MAX_AGE_S = 15 * 60
TOO_LATE = ":warning: I was restarted before I could answer this — please ask again."


def resume_held(deps: SlackDeps, client: WebClient, max_age_s: float = MAX_AGE_S) -> int:
    """Queue every held question still worth answering; returns how many were queued."""
    queued = 0
    for key, payload, claimed_at in deps.ledger.held():
        try:
            question = Question.from_payload(payload)
        except (TypeError, ValueError):
            deps.ledger.release(key)
            continue
        try:
            replies = fetch_replies(client, question.channel, question.reply_ts)
        except Exception as exc:  # Slack refused, or the network failed: try again at the next start
            log.warning(
                "could not check %s for an earlier reply (%s); will try at the next start", key, slack_error(exc)
            )
            continue
        if any(question.answered_by(m) for m in replies):
            deps.ledger.release(key)  # answered before the restart; only the release was lost
            continue
        if time.time() - claimed_at > max_age_s:
            post_quietly(client, question.channel, question.reply_ts, TOO_LATE, question.reply_metadata)
            deps.ledger.release(key)
            continue
        question.replies = replies
        status = status_for(deps, client, question)
        if deps.answers.submit(answer_question, deps, client, question, clean_text(question.text), status):
            queued += 1
        else:
            say_busy(deps, client, question)
    if queued:
        log.info("answering %d question(s) claimed before the restart", queued)
    return queued
