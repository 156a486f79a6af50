from functools import partial

from slack_bolt import App

from bot.slack.builders import UPLOAD_CALLBACK_ID
from bot.slack.deps import SlackDeps
from bot.slack.feedback_reason import REASON_CALLBACK_ID

from .feedback_reason import handle_reason_submission
from .upload_modal import handle_upload_submission


def register(app: App, deps: SlackDeps) -> None:
    app.view(UPLOAD_CALLBACK_ID)(partial(handle_upload_submission, deps))
    app.view(REASON_CALLBACK_ID)(partial(handle_reason_submission, deps))
