"""The optional "what was wrong?" modal a 👎 opens, and reading its submission (pure; tested without Slack)."""

from __future__ import annotations

import json

from slack_sdk.models.blocks import (
    ContextBlock,
    InputBlock,
    MarkdownTextObject,
    Option,
    PlainTextInputElement,
    PlainTextObject,
    RadioButtonsElement,
)
from slack_sdk.models.views import View

from bot.core import FEEDBACK_REASONS

REASON_CALLBACK_ID = "kb_feedback_reason"
REASON_BLOCK, REASON_ACTION = "reason", "reason_choice"
COMMENT_BLOCK, COMMENT_ACTION = "comment", "reason_comment"
COMMENT_MAX_CHARS = 1000


def reason_modal(answer_id: str, channel: str | None, message_ts: str | None, thread_ts: str | None) -> dict:
    """Both inputs optional: "Skip" (or closing) keeps the plain 👎 already recorded."""
    metadata = {"answer_id": answer_id, "channel": channel, "message_ts": message_ts, "thread_ts": thread_ts}
    return View(
        type="modal",
        callback_id=REASON_CALLBACK_ID,
        title=PlainTextObject(text="What was wrong?"),
        submit=PlainTextObject(text="Send"),
        close=PlainTextObject(text="Skip"),
        private_metadata=json.dumps(metadata),
        blocks=[
            InputBlock(
                block_id=REASON_BLOCK,
                label="The answer was…",
                optional=True,
                element=RadioButtonsElement(
                    action_id=REASON_ACTION,
                    options=[Option(value=code, text=label) for code, label in FEEDBACK_REASONS.items()],
                ),
            ),
            InputBlock(
                block_id=COMMENT_BLOCK,
                label="Anything else? (optional)",
                optional=True,
                element=PlainTextInputElement(
                    action_id=COMMENT_ACTION,
                    multiline=True,
                    max_length=COMMENT_MAX_CHARS,
                    placeholder="e.g. the policy changed in March; the answer is in the travel guide",
                ),
            ),
            ContextBlock(
                elements=[
                    MarkdownTextObject(
                        text="Your 👎 is already recorded. The knowledge base's owners see the reasons in their "
                        "kbbot Home tab, with the questions it could not answer."
                    )
                ]
            ),
        ],
    ).to_dict()


def read_reason(view: dict) -> tuple[dict, str | None, str | None]:
    """(metadata, reason code or None, comment or None) from a submitted reason modal; anything unexpected
    reads as not given."""
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except (json.JSONDecodeError, TypeError):
        metadata = {}
    if not isinstance(metadata, dict):
        metadata = {}
    values = (view.get("state") or {}).get("values") or {}
    choice = ((values.get(REASON_BLOCK) or {}).get(REASON_ACTION) or {}).get("selected_option") or {}
    reason = choice.get("value") if choice.get("value") in FEEDBACK_REASONS else None
    comment = ((values.get(COMMENT_BLOCK) or {}).get(COMMENT_ACTION) or {}).get("value")
    comment = comment.strip() if isinstance(comment, str) and comment.strip() else None
    return metadata, reason, comment
