"""The assistant pane's greeting and suggested prompts, as pure functions (tested without Slack).

Prompts are built from the KBs the user may read (the application layer decides which), the KBs of the channel
they are looking at first, one prompt per KB in turn, about one of its ready documents. A prompt is sent as the
user's message when clicked, so its text is reduced to plain words: nothing from a document name can become
Slack markup (a mention, a channel ping, a link).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from bot.slack.render import escape, shorten

MAX_PROMPTS = 4  # Slack shows at most four suggested prompts
TITLE_CHARS = 60
MESSAGE_CHARS = 200
PROMPTS_TITLE = "Ask the knowledge bases"
_CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,20}$")
_NOT_PLAIN = re.compile(r"[^\w .,'()+/-]+")  # \w keeps letters of every script (the Chinese guides, say)


@dataclass(frozen=True)
class PaneKb:
    name: str
    documents: tuple[str, ...]  # its ready documents, by name


def plain(text: str) -> str:
    """Letters, digits, spaces and harmless punctuation only."""
    return " ".join(_NOT_PLAIN.sub(" ", text).replace("_", " ").split())


def topic_of(document: str) -> str:
    """`annual-and-sick-leave.md` → `annual and sick leave`."""
    stem = PurePosixPath(document).stem if "." in document else document
    return plain(stem.replace("-", " ").replace("_", " "))


def ordered(kbs: Sequence[PaneKb], first: Sequence[str]) -> list[PaneKb]:
    """The viewed channel's KBs first (in `first`'s order), then the others by name."""
    rank = {name: i for i, name in enumerate(first)}
    return sorted(kbs, key=lambda kb: (rank.get(kb.name, len(rank)), kb.name))


def suggested_prompts(kbs: Sequence[PaneKb], first: Sequence[str]) -> list[dict[str, str]]:
    """Up to four {title, message} prompts: a document of each KB in turn, the viewed channel's KBs first."""
    queues = [[(kb, t) for d in sorted(kb.documents) if (t := topic_of(d))] for kb in ordered(kbs, first)]
    prompts: list[dict[str, str]] = []
    seen: set[str] = set()
    while len(prompts) < MAX_PROMPTS and any(queues):
        for queue in queues:
            if not queue or len(prompts) >= MAX_PROMPTS:
                continue
            kb, topic = queue.pop(0)
            message = shorten(f"What do the {plain(kb.name)} documents say about {topic}?", MESSAGE_CHARS)
            if message in seen:
                continue
            seen.add(message)
            prompts.append({"title": shorten(topic[:1].upper() + topic[1:], TITLE_CHARS), "message": message})
    return prompts


def channel_ref(channel: str | None) -> str | None:
    """A channel mention built by kbbot from a real channel id (anything else is not rendered)."""
    return f"<#{channel}>" if channel and _CHANNEL_ID.match(channel) else None


def greeting(kbs: Sequence[str], first: Sequence[str], context_channel: str | None) -> str:
    """The short hello posted when a pane thread starts (mrkdwn)."""
    if not kbs:
        return (
            "Hi! There are no knowledge bases you can read yet, so I can't answer questions here. "
            "Ask an admin to add one, or to add you to a channel its knowledge base is shared with."
        )
    names = ", ".join(f"*{escape(shorten(n, 80))}*" for n in kbs[:8]) + (" and more" if len(kbs) > 8 else "")
    text = f"Hi! Ask me anything and I'll answer from the knowledge bases you can read ({names}), with sources."
    where = channel_ref(context_channel)
    if where and first:
        text += f" You're looking at {where}, so I'll search {', '.join(f'*{escape(n)}*' for n in first)} first."
    return text + " Follow-up questions in this thread keep the conversation."
