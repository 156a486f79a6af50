import logging

from slack_bolt import Ack
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import AccessDenied, NotFound, Origin
from bot.slack import builders
from bot.slack.deps import SlackDeps
from bot.slack.work import fire_and_forget

log = logging.getLogger(__name__)

UPLOAD_FORM_FAILED = "Could not open the upload form. Please try again, or use `/kb upload`."


def handle_home_upload(deps: SlackDeps, ack: Ack, body: dict, action: dict, client: WebClient):
    """Upload on a KB in the Home tab: the upload modal, for that KB, if this person may still upload to it.
    Runs on the listener thread after the ack: the trigger id expires within seconds."""
    ack()
    user = (body.get("user") or {}).get("id") or ""
    kb = action.get("value") or ""
    origin = Origin.slack_home(user)
    try:
        deps.bot.check_upload(origin, kb)
    except (AccessDenied, NotFound) as refused:
        fire_and_forget(deps.side, _tell, client, user, builders.upload_refusal(kb, refused))
        return
    view = builders.upload_modal(deps.bot.uploadable_kbs(origin), kb, deps.settings.max_upload_mb, {"channel": None})
    try:
        client.views_open(trigger_id=body.get("trigger_id") or "", view=view)
    except SlackApiError as exc:
        log.warning("views.open (upload from Home) failed: %s", exc.response.get("error"))
        fire_and_forget(deps.side, _tell, client, user, UPLOAD_FORM_FAILED)


def _tell(client: WebClient, user: str, text: str) -> None:
    """A message in the person's DM with the bot (Home has no channel to answer in)."""
    try:
        client.chat_postMessage(channel=user, text=text)
    except SlackApiError as exc:
        log.warning("could not tell %s: %s", user, exc.response.get("error"))
