import json
from logging import Logger

from slack_bolt import Ack, BoltContext
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import (
    ContextBlock,
    InputBlock,
    MarkdownTextObject,
    Option,
    PlainTextObject,
    StaticSelectElement,
)
from slack_sdk.models.blocks.block_elements import FileInputElement
from slack_sdk.models.views import View

from bot.slack.kbs import all_manifests, refusal
from bot.slack.render import shorten
from bot.slack.uploads import SLACK_FILETYPES, SlackFile, ingest_slack_files, precheck, results_text
from tools.parsing import SUPPORTED_SUFFIXES

UPLOAD_CALLBACK_ID = "kb_upload"
KB_BLOCK, KB_ACTION = "kb", "kb_select"
FILES_BLOCK, FILES_ACTION = "files", "kb_files"
MAX_FILES = 10
FILE_INPUT_LIMIT_MB = 10  # Slack's own limit for files picked in a file_input (larger ones: drop them in a DM)


def build_upload_modal(kbs: list[str], initial_kb: str | None, max_mb: float, metadata: dict) -> dict:
    """The /kb upload modal: which KB (only those the user may upload to) and up to 10 files."""
    options = [Option(value=name, text=name) for name in kbs[:100]]  # select menus show no descriptions
    initial = next((o for o in options if o.value == initial_kb), None)
    select = StaticSelectElement(action_id=KB_ACTION, placeholder="Choose a knowledge base", options=options, initial_option=initial)
    return View(
        type="modal",
        callback_id=UPLOAD_CALLBACK_ID,
        title=PlainTextObject(text="Upload to a KB"),
        submit=PlainTextObject(text="Upload"),
        close=PlainTextObject(text="Cancel"),
        private_metadata=json.dumps(metadata),
        blocks=[
            InputBlock(block_id=KB_BLOCK, label="Knowledge base", element=select),
            InputBlock(
                block_id=FILES_BLOCK,
                label="Documents",
                element=FileInputElement(action_id=FILES_ACTION, filetypes=SLACK_FILETYPES, max_files=MAX_FILES),
            ),
            ContextBlock(elements=[MarkdownTextObject(
                text=f"Supported: {', '.join(SUPPORTED_SUFFIXES)} · up to {min(max_mb, FILE_INPUT_LIMIT_MB):g} MB each. "
                "A file with the same name replaces the previous version."
            )]),
        ],
    ).to_dict()


def handle_upload_submission(ack: Ack, body: dict, view: dict, client: WebClient, context: BoltContext, logger: Logger):
    """Validate in the modal (errors shown inline), then download + ingest in the background."""
    runtime = context["kbbot"]
    user = (body.get("user") or {}).get("id") or ""
    values = (view.get("state") or {}).get("values") or {}
    kb = (((values.get(KB_BLOCK) or {}).get(KB_ACTION) or {}).get("selected_option") or {}).get("value")
    files = [SlackFile.from_payload(f) for f in ((values.get(FILES_BLOCK) or {}).get(FILES_ACTION) or {}).get("files") or []]
    manifest = all_manifests(runtime).get(kb or "")
    if manifest is None:
        ack(response_action="errors", errors={KB_BLOCK: "Choose a knowledge base."})
        return
    if not manifest.may_upload(user):
        ack(response_action="errors", errors={KB_BLOCK: refusal(kb, manifest).replace(":no_entry: ", "")[:150]})
        return
    if not files:
        ack(response_action="errors", errors={FILES_BLOCK: "Choose at least one file."})
        return
    refused = [precheck(f, runtime.settings.max_upload_bytes) for f in files if f.url]
    if len(refused) == len(files) and all(refused):
        ack(response_action="errors", errors={FILES_BLOCK: shorten("; ".join(f"{f.name}: {r}" for f, r in zip(files, refused, strict=True)), 150)})
        return
    ack()
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except json.JSONDecodeError:
        metadata = {}
    runtime.submit(_ingest_and_report, runtime, client, kb, files, user, metadata.get("channel"))


def _ingest_and_report(runtime, client: WebClient, kb: str, files: list, user: str, channel: str | None) -> None:
    text = results_text(kb, ingest_slack_files(runtime, client, kb, files))
    if channel:
        try:
            client.chat_postEphemeral(channel=channel, user=user, text=text)
            return
        except SlackApiError:
            pass  # e.g. the bot is not in that channel: fall back to a DM
    client.chat_postMessage(channel=user, text=text)
