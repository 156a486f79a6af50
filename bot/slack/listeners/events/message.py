from slack_bolt import BoltContext, SayStream
from slack_sdk import WebClient

from bot.slack.conversation import BUSY, Question, answer_if_in_thread, post_quietly, receive
from bot.slack.deps import SlackDeps
from bot.slack.dm_uploads import handle_dm_files
from bot.slack.markup import mentions
from bot.slack.work import fire_and_forget


def handle_message(deps: SlackDeps, client: WebClient, context: BoltContext, event: dict, say_stream: SayStream):
    """DMs are answered; in channels, thread replies are answered where the bot already replied."""
    subtype = event.get("subtype")
    if event.get("bot_id") or subtype == "bot_message":
        return  # other bots (Bolt already drops the bot's own messages)
    is_dm = event.get("channel_type") == "im"
    if subtype == "file_share" and is_dm:
        if not deps.ingests.submit(handle_dm_files, deps, client, event):
            fire_and_forget(
                deps.side, post_quietly, client, event["channel"], event.get("thread_ts") or event["ts"], BUSY
            )
        return
    if subtype not in (None, "thread_broadcast", "file_share"):
        return  # edits, deletions, joins…
    thread_ts = event.get("thread_ts")
    in_thread = bool(thread_ts) and thread_ts != event["ts"]
    mentioned = mentions(event.get("text", ""), context.bot_user_id)
    if not is_dm and subtype == "file_share" and mentioned:
        # A mention with a file may arrive as this event only: answered here or by app_mention, once (claimed).
        receive(deps, client, mention_with_files(context, event), say_stream)
        return
    if not is_dm and (not in_thread or mentioned):
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
        has_files=bool(event.get("files")),
    )
    if is_dm:
        receive(deps, client, question, say_stream)
        return
    # Whether the bot is in this thread is known without asking Slack only where it answered before.
    queued = deps.answers.submit(answer_if_in_thread, deps, client, question, say_stream)
    if not queued and deps.bot.answered_in(question.channel, question.reply_ts):
        fire_and_forget(deps.side, post_quietly, client, question.channel, question.reply_ts, BUSY)


def mention_with_files(context: BoltContext, event: dict) -> Question:
    channel = context.channel_id or event["channel"]
    return Question(
        channel=channel,
        user=event.get("user"),
        text=event.get("text", ""),
        ts=event["ts"],
        thread_ts=event.get("thread_ts"),
        is_dm=False,
        team=context.team_id or event.get("team"),
        surface="mention",
        bot_user_id=context.bot_user_id,
        bot_id=context.bot_id,
        has_files=True,
    )
