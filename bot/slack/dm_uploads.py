"""Files dropped into a DM with the bot: ingest into the KB the message names, or ask which one."""

from __future__ import annotations

import json
import logging
import re

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import ActionsBlock, ButtonElement, MarkdownTextObject, SectionBlock

from bot.slack.conversation import clean_text
from bot.slack.kbs import all_manifests, refusal
from bot.slack.render import escape
from bot.slack.uploads import SlackFile, ingest_slack_files, precheck, results_text

log = logging.getLogger(__name__)

CHOICE_ACTION_PREFIX = "kb_upload_to:"
MAX_CHOICES = 20


def named_kbs(text: str, names) -> list[str]:  # noqa: ANN001
    return [n for n in sorted(names) if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text, re.I)]


def _post(client: WebClient, channel: str, thread_ts: str | None, text: str, blocks: list | None = None) -> dict:
    return client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text, blocks=blocks, unfurl_links=False)


def ingest_and_report(runtime, client: WebClient, kb: str, files: list[SlackFile], channel: str, thread_ts: str | None) -> None:  # noqa: ANN001
    results = ingest_slack_files(runtime, client, kb, files)
    _post(client, channel, thread_ts, results_text(kb, results))


def handle_dm_files(runtime, client: WebClient, event: dict) -> None:  # noqa: ANN001
    channel, user = event["channel"], event.get("user") or ""
    thread_ts = event.get("thread_ts") or event["ts"]
    files = [SlackFile.from_payload(f) for f in event.get("files") or [] if f.get("id")]
    if not files:
        return
    if not runtime.ledger.claim(f"message:{channel}:{event['ts']}"):
        return
    manifests = all_manifests(runtime)
    mine = sorted(name for name, m in manifests.items() if m.may_upload(user))
    if not mine:
        _post(client, channel, thread_ts, ":no_entry: You aren't an uploader of any knowledge base, so I can't add these files. "
              "Ask a KB's uploaders (see `/kb list`) or an admin.")
        return
    refused = [(f, precheck(f, runtime.settings.max_upload_bytes)) for f in files if f.url]
    refused = [(f, r) for f, r in refused if r]
    if refused and len(refused) == len(files):
        lines = "\n".join(f":no_entry: `{escape(f.name)}` — refused: {escape(r)}" for f, r in refused)
        _post(client, channel, thread_ts, f"I can't ingest these files:\n{lines}")
        return
    named = named_kbs(clean_text(event.get("text") or ""), manifests)
    if len(named) == 1:
        kb = named[0]
        if kb not in mine:
            _post(client, channel, thread_ts, refusal(kb, manifests[kb]))
            return
        _post(client, channel, thread_ts, f":inbox_tray: Adding {len(files)} file(s) to `{kb}`…")
        ingest_and_report(runtime, client, kb, files, channel, thread_ts)
        return
    choices = [n for n in named if n in mine] or mine
    ask_which_kb(client, channel, thread_ts, files, choices[:MAX_CHOICES])


def ask_which_kb(client: WebClient, channel: str, thread_ts: str, files: list[SlackFile], kbs: list[str]) -> None:
    names = ", ".join(f"`{escape(f.name)}`" for f in files)
    value = json.dumps({"files": [f.id for f in files]})
    buttons = [
        ButtonElement(text=kb, action_id=f"{CHOICE_ACTION_PREFIX}{kb}", value=value)
        for kb in kbs
    ]
    blocks = [SectionBlock(text=MarkdownTextObject(text=f"Which knowledge base should I add {names} to?"))]
    for start in range(0, len(buttons), 5):
        blocks.append(ActionsBlock(block_id=f"kb_upload_choice_{start}", elements=buttons[start : start + 5]))
    _post(client, channel, thread_ts, f"Which knowledge base should I add {len(files)} file(s) to?", [b.to_dict() for b in blocks])


def handle_choice(runtime, client: WebClient, body: dict, action: dict) -> None:  # noqa: ANN001
    """A KB button under the "which knowledge base?" question was clicked."""
    kb = action["action_id"][len(CHOICE_ACTION_PREFIX) :]
    user = (body.get("user") or {}).get("id") or ""
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    message = body.get("message") or {}
    thread_ts = message.get("thread_ts") or message.get("ts")
    manifest = all_manifests(runtime).get(kb)
    if manifest is None or not manifest.may_upload(user):
        _post(client, channel, thread_ts, refusal(kb, manifest) if manifest else f"There is no knowledge base `{escape(kb)}` any more.")
        return
    try:
        file_ids = json.loads(action.get("value") or "{}").get("files") or []
    except json.JSONDecodeError:
        file_ids = []
    if message.get("ts") and not runtime.ledger.claim(f"choice:{channel}:{message['ts']}"):
        return  # someone clicked twice
    try:
        client.chat_update(channel=channel, ts=message["ts"], text=f":inbox_tray: Adding {len(file_ids)} file(s) to `{kb}`…", blocks=[])
    except (SlackApiError, KeyError):
        log.debug("could not update the choice message")
    files = [SlackFile(id=str(i), name=str(i)) for i in file_ids]
    ingest_and_report(runtime, client, kb, files, channel, thread_ts)
