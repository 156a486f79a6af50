from logging import Logger

from slack_bolt import Ack, BoltContext, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

THANKS = {
    "good": "Thanks — glad that helped! :tada:",
    "bad": "Thanks for telling me. :memo: I've recorded it so the knowledge base owners can fix the gap.",
}


def handle_feedback_button(ack: Ack, body: dict, action: dict, client: WebClient, context: BoltContext, respond: Respond, logger: Logger):
    """Helpful / Not helpful on an answer: recorded durably (question, answer id, user), thanked ephemerally."""
    ack()
    verdict, _, answer_id = (action.get("value") or "").partition(":")
    if verdict not in THANKS:
        return
    container = body.get("container") or {}
    message = body.get("message") or {}
    channel = context.channel_id or container.get("channel_id")
    user = context.user_id or (body.get("user") or {}).get("id")
    message_ts = message.get("ts") or container.get("message_ts")
    context["kbbot"].records.log_feedback(
        answer_id=answer_id, value=verdict, user=user, channel=channel, message_ts=message_ts
    )
    try:
        client.chat_postEphemeral(
            channel=channel, user=user, thread_ts=message.get("thread_ts") or message_ts, text=THANKS[verdict]
        )
    except SlackApiError as exc:
        logger.debug("feedback ephemeral failed (%s); using response_url", exc.response.get("error"))
        if body.get("response_url"):
            respond(text=THANKS[verdict], response_type="ephemeral", replace_original=False)
