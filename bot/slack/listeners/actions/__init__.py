import re

from slack_bolt import App

from bot.slack.dm_uploads import CHOICE_ACTION_PREFIX
from bot.slack.render import FEEDBACK_ACTION_ID

from .feedback_buttons import handle_feedback_button
from .upload_choice import handle_upload_choice


def register(app: App) -> None:
    app.action(FEEDBACK_ACTION_ID)(handle_feedback_button)
    app.action(re.compile(f"^{re.escape(CHOICE_ACTION_PREFIX)}"))(handle_upload_choice)
