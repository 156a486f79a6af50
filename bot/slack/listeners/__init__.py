"""Bolt listeners, grouped by Slack feature; each package exposes `register(app, deps)`."""

from slack_bolt import App

from bot.slack.deps import SlackDeps
from bot.slack.listeners import actions, assistant, commands, events, views


def register_listeners(app: App, deps: SlackDeps) -> None:
    assistant.register(app, deps)  # middleware: pane threads are taken before the `message` listener sees them
    events.register(app, deps)
    commands.register(app, deps)
    views.register(app, deps)
    actions.register(app, deps)
