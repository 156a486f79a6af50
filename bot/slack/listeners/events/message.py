from logging import Logger

from slack_bolt import BoltContext, SayStream
from slack_sdk import WebClient

from bot.slack.conversation import Question, bot_in_thread, fetch_replies, mentions, receive
from bot.slack.dm_uploads import handle_dm_files


def handle_message(client: WebClient, context: BoltContext, event: dict, logger: Logger, say_stream: SayStream):
    """DMs are answered; in channels, thread replies are answered where the bot already replied."""
    subtype = event.get("subtype")
    if event.get("bot_id") or subtype == "bot_message":
        return  # other bots (Bolt already drops the bot's own messages)
    is_dm = event.get("channel_type") == "im"
    runtime = context["kbbot"]
    if subtype == "file_share" and is_dm:
        runtime.submit(handle_dm_files, runtime, client, event)
        return
    if subtype and subtype != "thread_broadcast":
        return  # edits, deletions, joins, file shares in channels…
    thread_ts = event.get("thread_ts")
    in_thread = bool(thread_ts) and thread_ts != event["ts"]
    if not is_dm and (not in_thread or mentions(event.get("text", ""), context.bot_user_id)):
        return  # top-level channel chatter, or an @mention (the app_mention listener answers it)
    question = Question(
        channel=context.channel_id or event["channel"],
        user=event.get("user"),
        text=event.get("text", ""),
        ts=event["ts"],
        thread_ts=thread_ts if in_thread else None,
        is_dm=is_dm,
        team=context.team_id or event.get("team"),
        surface="dm" if is_dm else "thread",
        bot_user_id=context.bot_user_id,
        bot_id=context.bot_id,
    )
    if not is_dm:
        # A thread reply without a mention: answered only in threads the bot already answered in.
        question.replies = fetch_replies(client, question.channel, question.thread_ts)
        if not bot_in_thread(question, question.replies):
            return
    receive(runtime, client, question, say_stream)
