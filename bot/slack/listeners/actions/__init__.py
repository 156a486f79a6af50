import re
from functools import partial

from slack_bolt import App

from bot.slack.builders import CHOICE_ACTION_PREFIX
from bot.slack.deps import SlackDeps
from bot.slack.home import UPLOAD_ACTION_ID
from bot.slack.render import FEEDBACK_ACTION_ID, TRACE_ACTION_ID

from .feedback_buttons import handle_feedback_button
from .home_upload import handle_home_upload
from .trace_button import handle_trace_button
from .upload_choice import handle_upload_choice


def register(app: App, deps: SlackDeps) -> None:
    app.action(FEEDBACK_ACTION_ID)(partial(handle_feedback_button, deps))
    app.action(TRACE_ACTION_ID)(partial(handle_trace_button, deps))
    app.action(UPLOAD_ACTION_ID)(partial(handle_home_upload, deps))
    app.action(re.compile(f"^{re.escape(CHOICE_ACTION_PREFIX)}"))(partial(handle_upload_choice, deps))
