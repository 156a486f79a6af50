"""Block Kit for the message shortcuts ("Ask kbbot about this", "Save to a knowledge base"), as pure functions."""

from __future__ import annotations

import json
from collections.abc import Sequence

from slack_sdk.models.blocks import (
    ContextBlock,
    InputBlock,
    MarkdownTextObject,
    PlainTextInputElement,
    PlainTextObject,
)
from slack_sdk.models.views import View

from bot.slack.builders import KB_BLOCK, kb_select
from bot.slack.render import sanitize, shorten

ASK_SHORTCUT_ID = "kb_ask_about_message"  # manifest.json features.shortcuts
SAVE_SHORTCUT_ID = "kb_save_thread"
SAVE_CALLBACK_ID = "kb_save_thread_modal"
TITLE_BLOCK, TITLE_ACTION = "title", "kb_title"
TITLE_CHARS = 150

CANNOT_READ = (
    ":warning: I can't read that conversation, so I can't use it. Invite me to the channel (`/invite @kbbot`) "
    "and try again — in a DM, use the one with me."
)
ALREADY_ASKED = ":information_source: I've already answered that message in its thread."
NO_TEXT = ":information_source: That message has no text I could ask about."


def default_title(text: str | None) -> str:
    """The message's first line, shortened: a title the person can keep or change."""
    first = next((line for line in sanitize(text or "").splitlines() if line.strip()), "")
    return shorten(first, 80) or "Slack thread"


def save_thread_modal(kbs: Sequence[str], title: str, metadata: dict) -> dict:
    """Which KB (only those the user may upload to) and a title; the thread itself is read on submit."""
    select = kb_select(kbs, kbs[0] if len(kbs) == 1 else None)
    return View(
        type="modal",
        callback_id=SAVE_CALLBACK_ID,
        title=PlainTextObject(text="Save to a KB"),
        submit=PlainTextObject(text="Save"),
        close=PlainTextObject(text="Cancel"),
        private_metadata=json.dumps(metadata),
        blocks=[
            InputBlock(block_id=KB_BLOCK, label="Knowledge base", element=select),
            InputBlock(
                block_id=TITLE_BLOCK,
                label="Title",
                element=PlainTextInputElement(
                    action_id=TITLE_ACTION, initial_value=shorten(title, TITLE_CHARS), max_length=TITLE_CHARS
                ),
            ),
            ContextBlock(
                elements=[
                    MarkdownTextObject(
                        text="The whole thread is saved as one document — who said what, and when — with a link "
                        "back to it. Saving the same thread again replaces the earlier copy."
                    )
                ]
            ),
        ],
    ).to_dict()
