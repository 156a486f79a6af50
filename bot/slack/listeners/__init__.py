"""Bolt listeners, grouped by Slack feature; each package exposes `register(app)`."""

from slack_bolt import App

from bot.slack.listeners import actions, commands, events, views


def register_listeners(app: App) -> None:
    events.register(app)
    commands.register(app)
    views.register(app)
    actions.register(app)
