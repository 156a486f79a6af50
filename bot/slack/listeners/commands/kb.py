"""`/kb help|list|ask|upload|delete`: acknowledged at once; everything slow runs on the work pools."""

import logging

from slack_bolt import Ack, BoltContext, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import AccessDenied, NotFound, Origin
from bot.slack import builders
from bot.slack.blocks import DocEntry, KbEntry, kb_list_blocks
from bot.slack.conversation import BUSY, ask
from bot.slack.deps import SlackDeps
from bot.slack.markup import clean_text
from bot.slack.render import escape, shorten

log = logging.getLogger(__name__)

UPLOAD_FORM_FAILED = ":warning: Sorry — I couldn't open the upload form. Please run `/kb upload` again."
LIST_FAILED = ":warning: Sorry — I couldn't list the knowledge bases right now. Please try again in a minute."


def origin_of(command: dict) -> Origin:
    channel, user = command.get("channel_id") or "", command.get("user_id") or ""
    return Origin.slack_dm(channel, user) if channel.startswith("D") else Origin.slack_channel(channel, user)


def handle_kb_command(
    deps: SlackDeps, ack: Ack, command: dict, client: WebClient, context: BoltContext, respond: Respond
):
    sub, _, rest = (command.get("text") or "").strip().partition(" ")
    sub, rest = sub.lower(), rest.strip()
    origin = origin_of(command)
    if sub in ("", "help"):
        ack(text=builders.HELP)
    elif sub == "list":
        ack()
        if not deps.answers.submit(list_kbs, deps, respond, origin):
            respond(text=BUSY, response_type="ephemeral")
    elif sub == "upload":
        ack()
        open_upload_modal(
            deps, client, respond, origin, command.get("trigger_id") or "", rest.split()[0] if rest else None
        )
    elif sub == "delete":
        kb, _, document = rest.partition(" ")
        if not kb or not document.strip():
            ack(text="Usage: `/kb delete <kb> <document>` (see `/kb list` for names)")
            return
        ack()
        if not deps.ingests.submit(delete_document, deps, respond, origin, kb, document.strip()):
            respond(text=BUSY, response_type="ephemeral")
    elif sub == "ask":
        question = clean_text(rest)
        if not question:
            ack(text="Usage: `/kb ask <question>`")
            return
        ack(text=f":mag: Searching the knowledge bases for: _{escape(shorten(question, 200))}_")
        if not deps.answers.submit(answer_privately, deps, respond, origin, question):
            respond(text=BUSY, response_type="ephemeral")
    else:
        ack(text=f"I don't know `/kb {escape(shorten(sub, 40))}`.\n\n{builders.HELP}")


def list_kbs(deps: SlackDeps, respond: Respond, origin: Origin) -> None:
    try:
        views = deps.bot.visible_kbs(origin)
    except Exception:
        log.exception("/kb list failed")
        respond(text=LIST_FAILED, response_type="ephemeral")
        return
    entries = [
        KbEntry(
            name=v.name,
            description=v.description,
            restricted=v.restricted,
            may_upload=v.may_upload,
            documents=len(v.documents),
            ready_documents=v.ready_documents,
            chunks=v.chunks,
            docs=[DocEntry(d.name, d.state, d.chunks, d.error, d.source_url) for d in v.documents],
            note=v.note,
        )
        for v in views
    ]
    respond(text="Knowledge bases you can use here", blocks=kb_list_blocks(entries), response_type="ephemeral")


def open_upload_modal(
    deps: SlackDeps, client: WebClient, respond: Respond, origin: Origin, trigger_id: str, kb: str | None
) -> None:
    """Runs on the listener thread after the ack: the trigger id expires within seconds."""
    if kb is not None:
        try:
            deps.bot.check_upload(origin, kb)
        except (AccessDenied, NotFound) as refused:
            respond(text=builders.upload_refusal(kb, refused), response_type="ephemeral")
            return
    mine = deps.bot.uploadable_kbs(origin)
    if not mine:
        respond(text=builders.NOT_AN_UPLOADER, response_type="ephemeral")
        return
    view = builders.upload_modal(mine, kb, deps.settings.max_upload_mb, {"channel": origin.channel})
    try:
        client.views_open(trigger_id=trigger_id, view=view)
    except SlackApiError as exc:  # e.g. the trigger expired: the log keeps Slack's error code
        log.warning("views.open for /kb upload failed: %s", exc.response.get("error"))
        respond(text=UPLOAD_FORM_FAILED, response_type="ephemeral")


def delete_document(deps: SlackDeps, respond: Respond, origin: Origin, kb: str, document: str) -> None:
    try:
        deps.bot.delete_document(origin, kb, document)
    except AccessDenied as exc:
        respond(text=builders.not_allowed(kb, exc.uploaders), response_type="ephemeral")
        return
    except NotFound as exc:
        respond(text=f":x: {escape(shorten(str(exc), 300))}", response_type="ephemeral")
        return
    except Exception:  # the store failed: the log says why, the person gets no exception text
        log.exception("/kb delete failed")
        respond(
            text=":warning: Sorry — I couldn't delete it right now. Please try again in a minute.",
            response_type="ephemeral",
        )
        return
    respond(text=f":wastebasket: Deleted `{escape(document)}` from `{escape(kb)}`.", response_type="ephemeral")


def answer_privately(deps: SlackDeps, respond: Respond, origin: Origin, question: str) -> None:
    rendered = ask(deps, origin, question, [])
    respond(text=rendered.text, blocks=rendered.blocks or None, response_type="ephemeral")
