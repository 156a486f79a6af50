"""Slack's assistant pane (Agents & AI Apps), with Bolt's `Assistant` middleware.

Only threads Slack opened as pane threads (`assistant_thread_started`, recorded in `deps.pane_threads`) are
handled here; any other threaded DM message falls through to the `message` listener (DM questions, uploads).
"""

from functools import partial

from slack_bolt import App, Assistant

from bot.slack.deps import SlackDeps

from .thread_context_changed import handle_thread_context_changed
from .thread_started import handle_thread_started
from .user_message import handle_user_message, pane_thread_matcher


def register(app: App, deps: SlackDeps) -> None:
    assistant = Assistant(thread_context_store=deps.pane_threads)
    assistant.thread_started(partial(handle_thread_started, deps))
    assistant.thread_context_changed(partial(handle_thread_context_changed, deps))
    assistant.user_message(partial(handle_user_message, deps), matchers=[pane_thread_matcher(deps)])
    app.assistant(assistant)
