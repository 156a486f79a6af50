from slack_bolt import App

from .app_mentioned import handle_app_mentioned
from .message import handle_message


def register(app: App) -> None:
    app.event("app_mention")(handle_app_mentioned)
    app.event("message")(handle_message)
