from slack_bolt import Ack
from slack_sdk import WebClient

from bot.slack.deps import SlackDeps
from bot.slack.dm_uploads import handle_choice


def handle_upload_choice(deps: SlackDeps, ack: Ack, body: dict, action: dict, client: WebClient):
    """Which KB for the files dropped in a DM: a button was clicked."""
    ack()
    deps.ingests.submit(handle_choice, deps, client, body, action)
