from slack_bolt import Ack
from slack_sdk import WebClient

from bot.slack.conversation import BUSY, post_quietly
from bot.slack.deps import SlackDeps
from bot.slack.dm_uploads import handle_choice
from bot.slack.work import fire_and_forget


def handle_upload_choice(deps: SlackDeps, ack: Ack, body: dict, action: dict, client: WebClient):
    """Which KB for the files dropped in a DM: a button was clicked."""
    ack()
    if not deps.ingests.submit(handle_choice, deps, client, body, action):
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
        message = body.get("message") or {}
        fire_and_forget(deps.side, post_quietly, client, channel, message.get("thread_ts") or message.get("ts"), BUSY)
