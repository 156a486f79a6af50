"""Message shortcuts: "Ask kbbot about this" and "Save to a knowledge base" (its modal included)."""

from functools import partial

from slack_bolt import App

from bot.slack.deps import SlackDeps
from bot.slack.shortcut_views import ASK_SHORTCUT_ID, SAVE_CALLBACK_ID, SAVE_SHORTCUT_ID

from .ask_about import handle_ask_about
from .save_thread import handle_save_shortcut, handle_save_submission


def register(app: App, deps: SlackDeps) -> None:
    app.shortcut(ASK_SHORTCUT_ID)(partial(handle_ask_about, deps))
    app.shortcut(SAVE_SHORTCUT_ID)(partial(handle_save_shortcut, deps))
    app.view(SAVE_CALLBACK_ID)(partial(handle_save_submission, deps))
