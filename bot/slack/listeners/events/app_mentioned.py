from slack_bolt import BoltContext, SayStream
from slack_sdk import WebClient

from bot.slack.conversation import Question, receive
from bot.slack.deps import SlackDeps


def handle_app_mentioned(deps: SlackDeps, client: WebClient, context: BoltContext, event: dict, say_stream: SayStream):
    """@kbbot in a channel: answer in the thread (the event is already acknowledged). Files that came with it
    are not read; the asker is told so, and how to upload."""
    if event.get("bot_id") or event.get("subtype") not in (None, "file_share"):
        return
    channel = context.channel_id or event["channel"]
    question = Question(
        channel=channel,
        user=event.get("user"),
        text=event.get("text", ""),
        ts=event["ts"],
        thread_ts=event.get("thread_ts"),
        is_dm=event.get("channel_type") == "im" or channel.startswith("D"),
        team=context.team_id or event.get("team"),
        surface="mention",
        bot_user_id=context.bot_user_id,
        bot_id=context.bot_id,
        has_files=bool(event.get("files")),
    )
    receive(deps, client, question, say_stream)
