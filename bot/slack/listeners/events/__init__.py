from functools import partial

from slack_bolt import App

from bot.slack.deps import SlackDeps

from .app_home_opened import handle_app_home_opened
from .app_mentioned import handle_app_mentioned
from .message import handle_message


def register(app: App, deps: SlackDeps) -> None:
    app.event("app_mention")(partial(handle_app_mentioned, deps))
    app.event("message")(partial(handle_message, deps))
    app.event("app_home_opened")(partial(handle_app_home_opened, deps))
