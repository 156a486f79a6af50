import json

from slack_bolt import Ack
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import AccessDenied, NotFound, Origin
from bot.slack import builders
from bot.slack.builders import FILES_ACTION, FILES_BLOCK, KB_ACTION, KB_BLOCK
from bot.slack.conversation import BUSY
from bot.slack.deps import SlackDeps
from bot.slack.render import shorten
from bot.slack.uploads import SlackFile, ingest_slack_files, precheck, results_text
from bot.slack.work import fire_and_forget


def origin_of(channel: str | None, user: str) -> Origin:
    """Where a form was opened from: a DM (or nowhere known: the person's own DM) or a channel."""
    if not channel or channel.startswith("D"):
        return Origin.slack_dm(channel or user, user)
    return Origin.slack_channel(channel, user)


def kb_choice_error(deps: SlackDeps, origin: Origin, kb: str) -> str | None:
    """The form's inline error for the chosen KB, if this person may not add documents to it from here."""
    try:
        deps.bot.check_upload(origin, kb)
    except NotFound:
        return "Choose a knowledge base."
    except AccessDenied:
        return builders.not_allowed_plain(kb)
    return None


def handle_upload_submission(deps: SlackDeps, ack: Ack, body: dict, view: dict, client: WebClient):
    """Validate in the modal (errors shown inline), then download + ingest on an ingest worker."""
    user = (body.get("user") or {}).get("id") or ""
    values = (view.get("state") or {}).get("values") or {}
    kb = (((values.get(KB_BLOCK) or {}).get(KB_ACTION) or {}).get("selected_option") or {}).get("value") or ""
    files = [
        SlackFile.from_payload(f) for f in ((values.get(FILES_BLOCK) or {}).get(FILES_ACTION) or {}).get("files") or []
    ]
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except json.JSONDecodeError:
        metadata = {}
    channel = metadata.get("channel") if isinstance(metadata, dict) else None
    origin = origin_of(channel, user)
    if refused_kb := kb_choice_error(deps, origin, kb):
        ack(response_action="errors", errors={KB_BLOCK: refused_kb})
        return
    if not files:
        ack(response_action="errors", errors={FILES_BLOCK: "Choose at least one file."})
        return
    refused = [precheck(f, deps.settings.max_upload_bytes) for f in files if f.url]
    if len(refused) == len(files) and all(refused):
        ack(
            response_action="errors",
            errors={
                FILES_BLOCK: shorten("; ".join(f"{f.name}: {r}" for f, r in zip(files, refused, strict=True)), 150)
            },
        )
        return
    ack()
    if not deps.ingests.submit(ingest_and_report, deps, client, origin, kb, files, user, channel):
        fire_and_forget(deps.side, tell, client, user, channel, BUSY)


def tell(client: WebClient, user: str, channel: str | None, text: str) -> None:
    """An ephemeral note in the channel the form was opened from, or a DM."""
    if channel:
        try:
            client.chat_postEphemeral(channel=channel, user=user, text=text)
            return
        except SlackApiError:
            pass  # e.g. the bot is not in that channel: fall back to a DM
    client.chat_postMessage(channel=user, text=text)


def ingest_and_report(
    deps: SlackDeps, client: WebClient, origin: Origin, kb: str, files: list[SlackFile], user: str, channel: str | None
) -> None:
    tell(client, user, channel, results_text(kb, ingest_slack_files(deps, client, origin, kb, files)))
