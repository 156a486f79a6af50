"""Block Kit for kbbot's forms and short replies, as pure functions (tested without Slack)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    ContextBlock,
    InputBlock,
    MarkdownTextObject,
    Option,
    PlainTextObject,
    SectionBlock,
    StaticSelectElement,
)
from slack_sdk.models.blocks.block_elements import FileInputElement
from slack_sdk.models.views import View

from bot.core import SUPPORTED_SUFFIXES, AccessDenied, NotFound
from bot.slack.render import NAME_CHARS, clamp, escape, sanitize, shorten

HELP = """*`/kb` — the knowledge-base bot*
• `/kb ask <question>` — answer privately, with sources
• `/kb list` — knowledge bases visible here, their documents and states
• `/kb upload [kb]` — add documents (a form with a file picker; uploaders only)
• `/kb delete <kb> <document>` — remove a document (uploaders only)
• `/kb channel` — which knowledge bases this channel searches first; `/kb channel add|remove <kb>` changes it \
(that KB's uploaders or admins)
• `/kb channel autoreply on|off` — answer top-level questions here without a mention, only when the answer is \
found (admins)
• `/kb help` — this message
You can also @mention me in a channel, DM me, or drop files into a DM with me and name the KB.
On any message, the ⋮ menu has *Ask kbbot about this* (answered in its thread) \
and *Save to a knowledge base* (the thread becomes a document; uploaders only).
Under every answer, *How I found this* shows only you how it was found: the standalone query, the KBs
considered, each round and its best passages. Sources say when each document was last updated and who
uploaded it; :warning: marks one that may be outdated.
My *Home* tab shows the knowledge bases you can read; their uploaders also see failed documents, an Upload button
and the knowledge gaps (questions I couldn't answer, answers marked 👎 — say why in the form a 👎 opens).
Or open me in Slack's *assistant pane*: I search the KBs of the channel you're looking at first (if you may
read them).
Files attached to a question are not read: add documents with `/kb upload`."""

FILES_NOT_READ = (
    ":paperclip: I don't read files attached to a question — I answer from the knowledge bases only. "
    "To add a document to a knowledge base, use `/kb upload` or drop the file into a direct message with me "
    "(outside an assistant thread) and name the KB (uploaders only)."
)

UPLOAD_CALLBACK_ID = "kb_upload"
KB_BLOCK, KB_ACTION = "kb", "kb_select"
FILES_BLOCK, FILES_ACTION = "files", "kb_files"
MAX_FILES = 10
FILE_INPUT_LIMIT_MB = 10  # Slack's own limit for files picked in a file_input (larger ones: drop them in a DM)
SLACK_FILETYPES = sorted({s.lstrip(".") for s in SUPPORTED_SUFFIXES})  # for file_input's `filetypes`
CHOICE_ACTION_PREFIX = "kb_upload_to:"
MAX_CHOICES = 20
NOT_AN_UPLOADER = ":no_entry: You aren't an uploader of any knowledge base. Ask a KB's uploaders or an admin."


def kb_select(kbs: Sequence[str], initial_kb: str | None = None) -> StaticSelectElement:
    """A form's KB menu (only the KBs offered; select menus show no descriptions, and hold at most 100)."""
    options = [Option(value=name, text=name) for name in list(kbs)[:100]]
    initial = next((o for o in options if o.value == initial_kb), None)
    return StaticSelectElement(
        action_id=KB_ACTION, placeholder="Choose a knowledge base", options=options, initial_option=initial
    )


def upload_modal(kbs: Sequence[str], initial_kb: str | None, max_mb: float, metadata: dict) -> dict:
    """The /kb upload modal: which KB (only those the user may upload to) and up to 10 files."""
    select = kb_select(kbs, initial_kb)
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
            ContextBlock(
                elements=[
                    MarkdownTextObject(
                        text=f"Supported: {', '.join(SUPPORTED_SUFFIXES)} · "
                        f"up to {min(max_mb, FILE_INPUT_LIMIT_MB):g} MB each. "
                        "A file with the same name replaces the previous version."
                    )
                ]
            ),
        ],
    ).to_dict()


def which_kb(file_names: Sequence[str], file_ids: Sequence[str], kbs: Sequence[str]) -> tuple[str, list[dict]]:
    """ "Which knowledge base should I add these to?" with a button per KB (the file ids ride along)."""
    names = clamp(", ".join(f"`{escape(shorten(n, NAME_CHARS))}`" for n in file_names), 2500)
    value = json.dumps({"files": list(file_ids)})
    buttons = [
        ButtonElement(text=kb, action_id=f"{CHOICE_ACTION_PREFIX}{kb}", value=value) for kb in list(kbs)[:MAX_CHOICES]
    ]
    blocks = [SectionBlock(text=MarkdownTextObject(text=f"Which knowledge base should I add {names} to?"))]
    for start in range(0, len(buttons), 5):
        blocks.append(ActionsBlock(block_id=f"kb_upload_choice_{start}", elements=buttons[start : start + 5]))
    return f"Which knowledge base should I add {len(file_names)} file(s) to?", [b.to_dict() for b in blocks]


_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")


def uploaders_text(uploaders: Sequence[str]) -> str:
    """Mentions of the uploaders (only real user ids become mentions: kb.toml is not trusted markup)."""
    people = [f"<@{u}>" if _USER_ID.match(u) else escape(u) for u in uploaders]
    return ", ".join(people) if people else "nobody yet (set `uploaders` in its kb.toml, or KBBOT_ADMIN_USERS)"


def not_allowed(kb: str, uploaders: Sequence[str]) -> str:
    return (
        f":no_entry: Only the uploaders of `{escape(kb)}` can add or delete its documents: {uploaders_text(uploaders)}."
    )


def not_allowed_plain(kb: str) -> str:
    """For a modal's inline error (plain text, 150 characters at most)."""
    return shorten(f"Only the uploaders of {sanitize(kb)} can add documents to it; ask them or an admin.", 150)


def no_such_kb(kb: str) -> str:
    return f"There is no knowledge base `{escape(kb)}`. See `/kb list`."


def upload_refusal(kb: str, refused: AccessDenied | NotFound) -> str:
    """Why this person may not upload to `kb`: who may (if they may see it), else that it does not exist."""
    return not_allowed(kb, refused.uploaders) if isinstance(refused, AccessDenied) else no_such_kb(kb)
