"""'How I found this' on an answer or a refusal: its trace, read back from the answer's record, shown only
to the person who clicked (`chat.postEphemeral`) — if they may read, where they clicked, every KB it names.

An ephemeral message rather than a modal: the check may look up channel membership over the network
(a DM's restricted KBs), longer than a modal's trigger_id lives (3 s); it stays next to the answer it
explains (in its thread); and it works the same in channels, DMs, the assistant pane and under a private
`/kb ask` answer.
"""

from logging import Logger

from slack_bolt import Ack, BoltContext, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import AccessDenied, NotFound, Origin
from bot.slack.deps import SlackDeps
from bot.slack.trace import FAILED, GONE, REFUSED, trace_blocks, trace_text
from bot.slack.work import fire_and_forget


def handle_trace_button(
    deps: SlackDeps,
    ack: Ack,
    body: dict,
    action: dict,
    client: WebClient,
    context: BoltContext,
    respond: Respond,
    logger: Logger,
):
    ack()
    answer_id = (action.get("value") or "").strip()
    container = body.get("container") or {}
    message = body.get("message") or {}
    channel = context.channel_id or container.get("channel_id") or (body.get("channel") or {}).get("id")
    user = context.user_id or (body.get("user") or {}).get("id")
    if not answer_id or not channel or not user:
        return
    thread_ts = message.get("thread_ts") or container.get("thread_ts") or message.get("ts")
    origin = (
        Origin.slack_dm(channel, user, thread_ts)
        if channel.startswith("D")
        else Origin.slack_channel(channel, user, thread_ts)
    )
    fire_and_forget(deps.side, show_trace, deps, client, respond, logger, body, origin, answer_id)


def show_trace(
    deps: SlackDeps, client: WebClient, respond: Respond, logger: Logger, body: dict, origin: Origin, answer_id: str
) -> None:
    blocks = None
    try:
        trace = deps.bot.trace(origin, answer_id)
    except AccessDenied:
        logger.info("trace of %s refused to %s in %s", answer_id, origin.user, origin.channel)
        text = REFUSED
    except NotFound:
        text = GONE
    except Exception:  # the records could not be read: the log says why, the person gets no exception text
        logger.exception("could not load the trace of %s", answer_id)
        text = FAILED
    else:
        text, blocks = trace_text(trace), trace_blocks(trace)
    try:
        client.chat_postEphemeral(
            channel=origin.channel, user=origin.user, thread_ts=origin.thread_ts, text=text, blocks=blocks
        )
    except SlackApiError as exc:  # e.g. an answer under a private /kb ask reply: the response_url still works
        logger.debug("trace ephemeral failed (%s); using response_url", exc.response.get("error"))
        if body.get("response_url"):
            respond(text=text, blocks=blocks, response_type="ephemeral", replace_original=False)
