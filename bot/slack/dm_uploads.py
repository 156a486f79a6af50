"""Files dropped into a DM with the bot: ingest into the KB the message names, or ask which one."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import AccessDenied, NotFound, Origin
from bot.slack import builders
from bot.slack.deps import SlackDeps
from bot.slack.markup import clean_text
from bot.slack.render import NAME_CHARS, clamp, escape, shorten
from bot.slack.uploads import SlackFile, ingest_slack_files, precheck, results_text

log = logging.getLogger(__name__)


def named_kbs(text: str, names: Iterable[str]) -> list[str]:
    return [n for n in sorted(names) if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text, re.I)]


def _post(client: WebClient, channel: str, thread_ts: str | None, text: str, blocks: list | None = None) -> None:
    client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text, blocks=blocks, unfurl_links=False)


def ingest_and_report(
    deps: SlackDeps,
    client: WebClient,
    origin: Origin,
    kb: str,
    files: list[SlackFile],
    channel: str,
    thread_ts: str | None,
) -> None:
    _post(client, channel, thread_ts, results_text(kb, ingest_slack_files(deps, client, origin, kb, files)))


def handle_dm_files(deps: SlackDeps, client: WebClient, event: dict) -> None:
    """On an ingest worker: files shared in a DM with the bot."""
    channel, user = event["channel"], event.get("user") or ""
    thread_ts = event.get("thread_ts") or event["ts"]
    files = [SlackFile.from_payload(f) for f in event.get("files") or [] if f.get("id")]
    if not files or not deps.ledger.claim(f"message:{channel}:{event['ts']}"):
        return
    origin = Origin.slack_dm(channel, user, thread_ts)
    mine = deps.bot.uploadable_kbs(origin)
    if not mine:
        _post(client, channel, thread_ts, builders.NOT_AN_UPLOADER)
        return
    refused = [(f, r) for f in files if f.url and (r := precheck(f, deps.settings.max_upload_bytes))]
    if refused and len(refused) == len(files):
        lines = "\n".join(
            f":no_entry: `{escape(shorten(f.name, NAME_CHARS))}` — refused: {escape(r)}" for f, r in refused
        )
        _post(client, channel, thread_ts, clamp(f"I can't ingest these files:\n{lines}"))
        return
    named = named_kbs(clean_text(event.get("text")), {v.name for v in deps.bot.visible_kbs(origin)} | set(mine))
    if len(named) == 1:
        kb = named[0]
        try:
            deps.bot.check_upload(origin, kb)
        except (AccessDenied, NotFound) as refused:
            _post(client, channel, thread_ts, builders.upload_refusal(kb, refused))
            return
        _post(client, channel, thread_ts, f":inbox_tray: Adding {len(files)} file(s) to `{escape(kb)}`…")
        ingest_and_report(deps, client, origin, kb, files, channel, thread_ts)
        return
    choices = [n for n in named if n in mine] or mine
    text, blocks = builders.which_kb([f.name for f in files], [f.id for f in files], choices)
    _post(client, channel, thread_ts, text, blocks)


def handle_choice(deps: SlackDeps, client: WebClient, body: dict, action: dict) -> None:
    """On an ingest worker: a KB button under the "which knowledge base?" question was clicked."""
    kb = action["action_id"][len(builders.CHOICE_ACTION_PREFIX) :]
    user = (body.get("user") or {}).get("id") or ""
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    message = body.get("message") or {}
    thread_ts = message.get("thread_ts") or message.get("ts")
    origin = Origin.slack_dm(channel, user, thread_ts)
    try:
        deps.bot.check_upload(origin, kb)
    except (AccessDenied, NotFound) as refused:
        _post(client, channel, thread_ts, builders.upload_refusal(kb, refused))
        return
    try:
        file_ids = json.loads(action.get("value") or "{}").get("files") or []
    except json.JSONDecodeError:
        file_ids = []
    if message.get("ts") and not deps.ledger.claim(f"choice:{channel}:{message['ts']}"):
        return  # someone clicked twice
    try:
        client.chat_update(
            channel=channel,
            ts=message["ts"],
            text=f":inbox_tray: Adding {len(file_ids)} file(s) to `{escape(kb)}`…",
            blocks=[],
        )
    except (SlackApiError, KeyError):
        log.debug("could not update the choice message")
    files = [SlackFile(id=str(i), name=str(i)) for i in file_ids]
    ingest_and_report(deps, client, origin, kb, files, channel, thread_ts)
