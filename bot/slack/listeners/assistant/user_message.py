from collections.abc import Callable

from slack_bolt import BoltContext, SayStream
from slack_sdk import WebClient

from bot.slack.conversation import ASSISTANT, Question, receive
from bot.slack.deps import SlackDeps


def pane_thread_matcher(deps: SlackDeps) -> Callable[[dict], bool]:
    """Bolt's matcher: a threaded DM message is the pane's only in a thread Slack opened as a pane thread
    (a local lookup: the request is acknowledged without waiting for Slack)."""

    def in_pane_thread(event: dict) -> bool:
        return deps.pane_threads.is_pane_thread(event.get("channel") or "", event.get("thread_ts"))

    return in_pane_thread


def handle_user_message(deps: SlackDeps, client: WebClient, context: BoltContext, event: dict, say_stream: SayStream):
    """A question in the pane: the one ask flow (status with loading messages, the thread's title, the cited
    answer), with the channel the user is looking at searched first — if the user may read its KBs."""
    channel = context.channel_id or event["channel"]
    pane_context = deps.pane_threads.context_of(channel, event["thread_ts"]) or {}
    question = Question(
        channel=channel,
        user=event.get("user"),
        text=event.get("text", ""),
        ts=event["ts"],
        thread_ts=event["thread_ts"],
        is_dm=True,
        team=context.team_id or event.get("team"),
        surface=ASSISTANT,
        bot_user_id=context.bot_user_id,
        bot_id=context.bot_id,
        context_channel=pane_context.get("channel_id") or None,
        has_files=bool(event.get("files")) or event.get("subtype") == "file_share",
    )
    receive(deps, client, question, say_stream)
