from slack_bolt import Ack, BoltContext
from slack_sdk import WebClient

from bot.slack.dm_uploads import handle_choice


def handle_upload_choice(ack: Ack, body: dict, action: dict, client: WebClient, context: BoltContext):
    """Which KB for the files dropped in a DM: a button was clicked."""
    ack()
    runtime = context["kbbot"]
    runtime.submit(handle_choice, runtime, client, body, action)
