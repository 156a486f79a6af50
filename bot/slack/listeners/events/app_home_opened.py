"""The Home tab: rebuilt from the application layer and published (`views.publish`) each time it is opened."""

import logging

from slack_bolt import BoltContext
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import Origin
from bot.slack.deps import SlackDeps
from bot.slack.home import home_view, unavailable_view
from bot.slack.work import fire_and_forget

log = logging.getLogger(__name__)


def handle_app_home_opened(deps: SlackDeps, client: WebClient, context: BoltContext, event: dict):
    if event.get("tab") != "home":
        return  # the Messages tab: nothing to build
    user = context.user_id or event.get("user")
    if user:
        fire_and_forget(deps.side, publish_home, deps, client, user)


def publish_home(deps: SlackDeps, client: WebClient, user: str) -> None:
    try:
        view = home_view(deps.bot.home(Origin.slack_home(user)))
    except Exception:  # the store or the records failed: the log says why, the person gets no exception text
        log.exception("App Home for %s could not be built", user)
        view = unavailable_view()
    try:
        client.views_publish(user_id=user, view=view)
    except SlackApiError as exc:
        log.warning("views.publish for %s failed: %s", user, exc.response.get("error"))
