from logging import Logger

from slack_bolt import Ack

from bot.core import Origin
from bot.slack.deps import SlackDeps
from bot.slack.feedback_reason import read_reason
from bot.slack.work import fire_and_forget


def handle_reason_submission(deps: SlackDeps, ack: Ack, body: dict, view: dict, logger: Logger):
    """The 👎 reason modal was sent: the modal closes at once; the reason joins that 👎's record."""
    ack()
    user = (body.get("user") or {}).get("id") or ""
    metadata, reason, comment = read_reason(view)
    answer_id = metadata.get("answer_id")
    if not isinstance(answer_id, str) or not answer_id or (reason is None and comment is None):
        return  # nothing to add: the plain 👎 stays
    channel = metadata.get("channel") if isinstance(metadata.get("channel"), str) else ""
    thread_ts = metadata.get("thread_ts") if isinstance(metadata.get("thread_ts"), str) else None
    message_ts = metadata.get("message_ts") if isinstance(metadata.get("message_ts"), str) else None
    origin = Origin.slack_channel(channel, user, thread_ts)
    fire_and_forget(deps.side, _record, deps, logger, origin, answer_id, reason, comment, message_ts)


def _record(deps, logger, origin, answer_id, reason, comment, message_ts) -> None:
    try:
        deps.bot.record_feedback_reason(origin, answer_id, reason, comment, message_ts)
    except Exception:
        logger.exception("could not record the 👎 reason on %s", answer_id)
