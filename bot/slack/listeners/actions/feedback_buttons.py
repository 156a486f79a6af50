from logging import Logger

from slack_bolt import Ack, BoltContext, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import Origin
from bot.slack.deps import SlackDeps
from bot.slack.feedback_reason import reason_modal
from bot.slack.work import fire_and_forget

THANKS = {
    "good": "Thanks — glad that helped! :tada:",
    "bad": "Thanks for telling me. :memo: I've recorded it so the knowledge base owners can fix the gap.",
}


def handle_feedback_button(
    deps: SlackDeps,
    ack: Ack,
    body: dict,
    action: dict,
    client: WebClient,
    context: BoltContext,
    respond: Respond,
    logger: Logger,
):
    """Helpful / Not helpful on an answer: recorded durably with the answer, thanked ephemerally. Not helpful
    also opens the optional reason modal (closing it keeps the plain 👎)."""
    ack()
    verdict, _, answer_id = (action.get("value") or "").partition(":")
    if verdict not in THANKS or not answer_id:
        return
    container = body.get("container") or {}
    message = body.get("message") or {}
    channel = context.channel_id or container.get("channel_id")
    user = context.user_id or (body.get("user") or {}).get("id")
    message_ts = message.get("ts") or container.get("message_ts")
    fire_and_forget(
        deps.side,
        _record_and_thank,
        deps,
        client,
        respond,
        logger,
        body,
        answer_id,
        verdict,
        channel,
        user,
        message_ts,
        message.get("thread_ts") or message_ts,
    )
    if verdict == "bad" and body.get("trigger_id"):  # on this thread, right after the ack: the trigger expires
        view = reason_modal(answer_id, channel, message_ts, message.get("thread_ts") or message_ts)
        try:
            client.views_open(trigger_id=body["trigger_id"], view=view)
        except SlackApiError as exc:  # the plain 👎 is recorded either way
            logger.info("the 👎 reason modal could not open: %s", exc.response.get("error"))


def _record_and_thank(
    deps: SlackDeps,
    client: WebClient,
    respond: Respond,
    logger: Logger,
    body: dict,
    answer_id: str,
    verdict: str,
    channel: str,
    user: str,
    message_ts: str | None,
    thread_ts: str | None,
) -> None:
    try:
        deps.bot.record_feedback(Origin.slack_channel(channel, user, thread_ts), answer_id, verdict, message_ts)
    except Exception:  # the thanks still goes out; the log keeps what was lost
        logger.exception("could not record feedback %s on %s", verdict, answer_id)
    try:
        client.chat_postEphemeral(channel=channel, user=user, thread_ts=thread_ts, text=THANKS[verdict])
    except SlackApiError as exc:
        logger.debug("feedback ephemeral failed (%s); using response_url", exc.response.get("error"))
        if body.get("response_url"):
            respond(text=THANKS[verdict], response_type="ephemeral", replace_original=False)
