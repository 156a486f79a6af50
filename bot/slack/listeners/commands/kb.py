import logging
from logging import Logger

from slack_bolt import Ack, BoltContext, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import ContextBlock, MarkdownTextObject, SectionBlock

from bot.agent.access import allowed_kbs
from bot.slack.conversation import clean_text, scope_for
from bot.slack.kbs import all_manifests, refusal
from bot.slack.listeners.views.upload_modal import build_upload_modal
from bot.slack.records import new_answer_id
from bot.slack.render import escape, render_answer, render_error, shorten

HELP = """*`/kb` — the knowledge-base bot*
• `/kb ask <question>` — answer privately, with sources
• `/kb list` — knowledge bases visible here, their documents and states
• `/kb upload [kb]` — add documents (a form with a file picker; uploaders only)
• `/kb delete <kb> <document>` — remove a document (uploaders only)
• `/kb help` — this message
You can also @mention me in a channel, DM me, or drop files into a DM with me and name the KB."""

STATE_MARK = {"ready": ":white_check_mark:", "processing": ":hourglass_flowing_sand:", "failed": ":x:"}
DOCS_SHOWN = 15

log = logging.getLogger(__name__)


def handle_kb_command(ack: Ack, command: dict, client: WebClient, context: BoltContext, respond: Respond, logger: Logger):
    """/kb help|list|upload|delete|ask — acknowledged at once; slow parts run on the worker pool."""
    runtime = context["kbbot"]
    sub, _, rest = (command.get("text") or "").strip().partition(" ")
    sub, rest = sub.lower(), rest.strip()
    user, channel = command.get("user_id") or "", command.get("channel_id") or ""
    if sub in ("", "help"):
        ack(text=HELP)
    elif sub == "list":
        ack()
        runtime.submit(_list, runtime, client, respond, channel, user)
    elif sub == "upload":
        ack()
        _open_upload_modal(runtime, client, respond, command, rest.split()[0] if rest else None)
    elif sub == "delete":
        kb, _, document = rest.partition(" ")
        if not kb or not document.strip():
            ack(text="Usage: `/kb delete <kb> <document>` (see `/kb list` for names)")
            return
        ack()
        runtime.submit(_delete, runtime, respond, user, kb, document.strip())
    elif sub == "ask":
        question = clean_text(rest, context.bot_user_id)
        if not question:
            ack(text="Usage: `/kb ask <question>`")
            return
        ack(text=f":mag: Searching the knowledge bases for: _{escape(shorten(question, 200))}_")
        runtime.submit(_ask, runtime, client, respond, channel, user, question)
    else:
        ack(text=f"I don't know `/kb {escape(sub)}`. Did you mean `/kb ask {escape(shorten(command.get('text') or '', 80))}`?\n\n{HELP}")


def _is_dm(channel: str) -> bool:
    return channel.startswith("D")


def _list(runtime, client: WebClient, respond: Respond, channel: str, user: str) -> None:
    service = runtime.service
    manifests = all_manifests(runtime)
    scope = scope_for(runtime, client, channel, user, _is_dm(channel))
    visible = set(allowed_kbs(manifests, scope))
    blocks = [SectionBlock(text=MarkdownTextObject(text="*Knowledge bases you can use here*")).to_dict()]
    for summary in service.summaries():
        if summary.name not in visible:
            continue
        manifest = manifests.get(summary.name)
        flags = " · :lock: restricted" if manifest is not None and manifest.restricted else ""
        may_upload = manifest is not None and manifest.may_upload(user)
        head = (
            f"*{escape(summary.name)}* — {summary.ready_documents}/{summary.documents} documents ready, "
            f"{summary.chunks} chunks{flags}{' · you can upload' if may_upload else ''}\n"
            f"{escape(shorten(summary.description, 200))}"
        )
        blocks.append(SectionBlock(text=MarkdownTextObject(text=head)).to_dict())
        documents = service.store.registry.list_documents(summary.name) if summary.documents else []
        if documents:
            lines = []
            for doc in documents[:DOCS_SHOWN]:
                name = f"<{doc.source_url}|{escape(doc.name)}>" if doc.source_url else escape(doc.name)
                detail = f"{doc.live_chunks} chunks" if doc.state == "ready" else escape(shorten(doc.error or doc.state, 80))
                lines.append(f"{STATE_MARK.get(doc.state, '•')} {name} ({detail})")
            if len(documents) > DOCS_SHOWN:
                lines.append(f"…and {len(documents) - DOCS_SHOWN} more")
            blocks.append(ContextBlock(elements=[MarkdownTextObject(text="\n".join(lines))]).to_dict())
    if len(blocks) == 1:
        blocks.append(SectionBlock(text=MarkdownTextObject(text="No knowledge bases are available here.")).to_dict())
    respond(text="Knowledge bases you can use here", blocks=blocks[:50], response_type="ephemeral")


def _open_upload_modal(runtime, client: WebClient, respond: Respond, command: dict, kb: str | None) -> None:
    user, channel = command.get("user_id") or "", command.get("channel_id") or ""
    everything = all_manifests(runtime)
    if kb is not None and kb not in everything:
        respond(text=f"There is no knowledge base `{escape(kb)}`. See `/kb list`.", response_type="ephemeral")
        return
    if kb is not None and not everything[kb].may_upload(user):
        respond(text=refusal(kb, everything[kb]), response_type="ephemeral")
        return
    mine = sorted(n for n, m in everything.items() if m.may_upload(user))
    if not mine:
        respond(text=":no_entry: You aren't an uploader of any knowledge base. Ask a KB's uploaders or an admin.", response_type="ephemeral")
        return
    view = build_upload_modal(mine, kb, runtime.settings.max_upload_mb, {"channel": channel})
    try:
        client.views_open(trigger_id=command["trigger_id"], view=view)
    except SlackApiError as exc:
        respond(text=f"Could not open the upload form ({exc.response.get('error')}). Please try again.", response_type="ephemeral")


def _delete(runtime, respond: Respond, user: str, kb: str, document: str) -> None:
    from tools.store import KnowledgeBaseError

    manifest = all_manifests(runtime).get(kb)
    if manifest is None:
        respond(text=f"There is no knowledge base `{escape(kb)}`. See `/kb list`.", response_type="ephemeral")
        return
    if not manifest.may_upload(user):
        respond(text=refusal(kb, manifest), response_type="ephemeral")
        return
    try:
        with runtime.kb_lock(kb):
            runtime.service.delete_document(kb, document)
    except KnowledgeBaseError as exc:
        respond(text=f":x: {escape(str(exc))}", response_type="ephemeral")
        return
    respond(text=f":wastebasket: Deleted `{escape(document)}` from `{escape(kb)}`.", response_type="ephemeral")


def _ask(runtime, client: WebClient, respond: Respond, channel: str, user: str, question: str) -> None:
    try:
        scope = scope_for(runtime, client, channel, user, _is_dm(channel))
        answer = runtime.engine.answer(question, (), scope=scope)
        answer_id = new_answer_id()
        runtime.records.log_answer(answer, answer_id=answer_id, surface="command", channel=channel, thread_ts=None, user=user)
        rendered = render_answer(answer, answer_id)
    except Exception:
        log.exception("/kb ask failed")
        rendered = render_error("Sorry — something went wrong while answering. Please try again in a moment.")
    respond(text=rendered.text, blocks=rendered.blocks, response_type="ephemeral")
