""" "Save to a knowledge base": a modal (the KB — only those the person may upload to — and a title), then the
message's thread becomes one document in that KB, its permalink the source link citations show.

Who may save is decided by the application layer (`KnowledgeBot.check_upload`/`upload`, the same rule as
any upload): a KB's uploaders and the admins. Re-saving a thread replaces its earlier copy (the document is
named after the thread).
"""

import json
import logging

from slack_bolt import Ack, BoltContext, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import USER_ERRORS, AccessDenied, NotFound, Origin, Upload
from bot.slack import builders
from bot.slack.builders import KB_ACTION, KB_BLOCK
from bot.slack.conversation import BUSY, fetch_replies, slack_error
from bot.slack.deps import SlackDeps
from bot.slack.listeners.views.upload_modal import kb_choice_error, origin_of, tell
from bot.slack.markup import clean_text
from bot.slack.shortcut_views import CANNOT_READ, TITLE_ACTION, TITLE_BLOCK, default_title, save_thread_modal
from bot.slack.thread_document import document_name, render_document, speaker_names, thread_messages
from bot.slack.uploads import FileResult, results_text
from bot.slack.work import fire_and_forget

log = logging.getLogger(__name__)

MAX_REFUSAL_KBS = 3
FORM_FAILED = "Could not open the form. Please try again."


def refusal(deps: SlackDeps, origin: Origin) -> str:
    """Why this person may not save here, naming who may: the uploaders of the KBs this channel searches
    first (else of the KBs they can see here)."""
    views = deps.bot.visible_kbs(origin)
    here = [v.name for v in views if origin.channel in v.channels] or [v.name for v in views]
    lines = []
    for kb in here[:MAX_REFUSAL_KBS]:
        try:
            deps.bot.check_upload(origin, kb)
        except (AccessDenied, NotFound) as refused:
            lines.append(builders.upload_refusal(kb, refused))
    return "\n".join(lines) or builders.NOT_AN_UPLOADER


def handle_save_shortcut(
    deps: SlackDeps, ack: Ack, body: dict, client: WebClient, context: BoltContext, respond: Respond
):
    """On the listener thread after the ack: the trigger id expires within seconds."""
    ack()
    user = (body.get("user") or {}).get("id") or ""
    channel = (body.get("channel") or {}).get("id") or context.channel_id or ""
    message = body.get("message") or {}
    ts = str(message.get("ts") or body.get("message_ts") or "")
    origin = origin_of(channel, user)
    try:
        mine = deps.bot.uploadable_kbs(origin)
        if not mine:
            respond(text=refusal(deps, origin), response_type="ephemeral")
            return
    except Exception:
        log.exception("save shortcut: could not look up the knowledge bases")
        respond(text=builders.NOT_AN_UPLOADER, response_type="ephemeral")
        return
    metadata = {"channel": channel, "thread_ts": message.get("thread_ts") or ts}
    view = save_thread_modal(mine, default_title(clean_text(message.get("text"))), metadata)
    try:
        client.views_open(trigger_id=body.get("trigger_id") or "", view=view)
    except SlackApiError as exc:
        log.warning("save shortcut: views.open failed: %s", slack_error(exc))
        respond(text=FORM_FAILED, response_type="ephemeral")


def handle_save_submission(deps: SlackDeps, ack: Ack, body: dict, view: dict, client: WebClient, context: BoltContext):
    """Checked in the modal (errors shown inline); the thread is read and ingested on an ingest worker."""
    user = (body.get("user") or {}).get("id") or ""
    values = (view.get("state") or {}).get("values") or {}
    kb = (((values.get(KB_BLOCK) or {}).get(KB_ACTION) or {}).get("selected_option") or {}).get("value") or ""
    title = " ".join(str(((values.get(TITLE_BLOCK) or {}).get(TITLE_ACTION) or {}).get("value") or "").split())
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except json.JSONDecodeError:
        metadata = {}
    metadata = metadata if isinstance(metadata, dict) else {}
    channel, thread_ts = str(metadata.get("channel") or ""), str(metadata.get("thread_ts") or "")
    if not channel or not thread_ts:
        ack(response_action="errors", errors={KB_BLOCK: "This form lost track of its thread; please start again."})
        return
    origin = origin_of(channel, user)
    if refused_kb := kb_choice_error(deps, origin, kb):
        ack(response_action="errors", errors={KB_BLOCK: refused_kb})
        return
    if not title:
        ack(response_action="errors", errors={TITLE_BLOCK: "Give the document a title."})
        return
    ack()
    own = (context.bot_id, context.bot_user_id)
    if not deps.ingests.submit(save_thread, deps, client, origin, kb, title, (channel, thread_ts), own):
        fire_and_forget(deps.side, tell, client, user, channel, BUSY)


def is_public(client: WebClient, channel: str) -> bool:
    """Whether Slack says this is a public channel; when it cannot say, the conversation counts as private."""
    try:
        info = client.conversations_info(channel=channel).get("channel") or {}
    except Exception as exc:
        log.warning("conversations.info %s failed (%s); the thread counts as private", channel, slack_error(exc))
        return False
    return bool(info.get("is_channel")) and info.get("is_private") is False and not info.get("is_mpim")


def save_thread(
    deps: SlackDeps,
    client: WebClient,
    origin: Origin,
    kb: str,
    title: str,
    thread: tuple[str, str],
    own: tuple[str | None, str | None],
) -> None:
    """On an ingest worker: the thread (channel, ts) → a document → the KB (through the façade), then tell the
    person. `own`: kbbot's bot and user ids (its replies are left out)."""
    (channel, thread_ts), (own_bot_id, own_user_id), user = thread, own, origin.user or ""
    name = document_name(channel, thread_ts)
    try:
        replies = fetch_replies(client, channel, thread_ts, pages=10)
    except Exception as exc:
        log.info("save shortcut: cannot read %s/%s (%s)", channel, thread_ts, slack_error(exc))
        tell(client, user, channel, CANNOT_READ)
        return
    people = [m["user"] for m in replies if m.get("user") and m.get("user") != own_user_id]
    names = speaker_names(client, people)
    messages = thread_messages(replies, lambda u: names.get(u, u), own_bot_id, own_user_id)
    if not messages:
        tell(client, user, channel, ":information_source: That thread has no messages with text to save.")
        return
    permalink = None
    try:
        permalink = client.chat_getPermalink(channel=channel, message_ts=thread_ts).get("permalink")
    except Exception as exc:  # the document is still worth saving; its citations just have no link
        log.warning("chat.getPermalink %s/%s failed: %s", channel, thread_ts, slack_error(exc))
    document = render_document(title, channel, messages, permalink)
    try:
        report = deps.bot.save_conversation(
            origin, kb, Upload(name, document, permalink), public=is_public(client, channel)
        )
        results = [FileResult(d.document, d.status, d.chunks, d.error) for d in report.documents]
    except USER_ERRORS as exc:
        status = "refused" if isinstance(exc, AccessDenied | NotFound) else "failed"
        results = [FileResult(name, status, detail=str(exc))]
    except Exception:
        log.exception("saving thread %s/%s into %s failed", channel, thread_ts, kb)
        results = [FileResult(name, "failed", detail="internal error while ingesting (see the bot's log)")]
    tell(client, user, channel, results_text(kb, results))
