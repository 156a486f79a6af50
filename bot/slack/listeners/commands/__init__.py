from functools import partial

from slack_bolt import App

from bot.slack.deps import SlackDeps

from .kb import handle_kb_command


def register(app: App, deps: SlackDeps) -> None:
    app.command("/kb")(partial(handle_kb_command, deps))
