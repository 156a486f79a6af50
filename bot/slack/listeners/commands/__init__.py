from slack_bolt import App

from .kb import handle_kb_command


def register(app: App) -> None:
    app.command("/kb")(handle_kb_command)
