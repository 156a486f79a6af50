"""A Slack message → a question for the engine → a threaded reply.

History comes from Slack itself (`conversations.replies` for threads, `conversations.history` for DMs),
not from process memory, so a restart loses no context. The channel decides the scope: restricted KBs
only in their channels, or in DMs of their members (`conversations.members`).
"""

from __future__ import annotations

import html
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.agent.access import Scope
from bot.agent.models import Turn
from bot.slack.records import new_answer_id
from bot.slack.render import RenderedAnswer, render_answer, render_error
from bot.slack.runtime import SlackRuntime

log = logging.getLogger(__name__)

MAX_TURNS = 10
DM_HISTORY_WINDOW_S = 30 * 60  # earlier top-level DM messages count as context for this long
FIRST_STATUS = "Searching the knowledge bases…"
GREETING = (
    "Hi! Ask me a question and I'll answer from the knowledge bases, with sources. "
    "Try `/kb help` for uploads and more."
)

_USER_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_SPECIAL = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")
_CHANNEL = re.compile(r"<#[CG][A-Z0-9]+\|([^>]*)>")
_LINK = re.compile(r"<((?:https?|mailto):[^>|]+)(?:\|([^>]*))?>")


def clean_text(text: str, bot_user_id: str | None = None) -> str:
    """Slack's message markup → plain text for the engine: the bot's own mention removed."""
    text = text or ""
    text = _USER_MENTION.sub(lambda m: "" if m.group(1) == bot_user_id else f"@{m.group(1)}", text)
    text = _SPECIAL.sub("", text)
    text = _CHANNEL.sub(lambda m: f"#{m.group(1)}", text)
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    return " ".join(html.unescape(text).split())


def mentions(text: str, user_id: str | None) -> bool:
    return bool(user_id) and any(m.group(1) == user_id for m in _USER_MENTION.finditer(text or ""))


def _ts(value: str | None) -> float:
    try:
        return float(value or 0)
    except ValueError:
        return 0.0


@dataclass
class Question:
    """One message to answer, and where it came from."""

    channel: str
    user: str | None
    text: str
    ts: str
    thread_ts: str | None  # the thread the message is in, if any
    is_dm: bool
    team: str | None
    surface: str  # "mention" | "dm" | "thread"
    bot_user_id: str | None = None
    bot_id: str | None = None
    replies: list[dict] | None = None  # the thread, when the listener already fetched it

    @property
    def reply_ts(self) -> str:
        """Replies always go in the message's thread (a new one for a top-level message)."""
        return self.thread_ts or self.ts

    def from_bot(self, message: dict) -> bool:
        return bool(
            (self.bot_user_id and message.get("user") == self.bot_user_id)
            or (self.bot_id and message.get("bot_id") == self.bot_id)
        )


# --- Slack reads -------------------------------------------------------------------------------


def fetch_replies(client: WebClient, channel: str, thread_ts: str, pages: int = 5) -> list[dict]:
    messages: list[dict] = []
    cursor = None
    for _ in range(pages):
        response = client.conversations_replies(channel=channel, ts=thread_ts, limit=200, cursor=cursor)
        messages += response.get("messages") or []
        cursor = (response.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            break
    return messages


def bot_in_thread(question: Question, replies: list[dict]) -> bool:
    return any(question.from_bot(m) for m in replies)


def turns_from(question: Question, messages: list[dict]) -> list[Turn]:
    """Messages before this one → turns, oldest first; other bots and system messages are skipped."""
    turns: list[Turn] = []
    for message in sorted(messages, key=lambda m: _ts(m.get("ts"))):
        if _ts(message.get("ts")) >= _ts(question.ts):
            continue
        if question.from_bot(message):
            role = "assistant"
        elif message.get("bot_id") or message.get("subtype") not in (None, "thread_broadcast", "file_share"):
            continue
        else:
            role = "user"
        text = clean_text(message.get("text") or "", question.bot_user_id)
        if text:
            turns.append(Turn(role, text))
    return turns[-MAX_TURNS:]


def history_for(client: WebClient, question: Question) -> list[Turn]:
    try:
        if question.thread_ts:
            replies = question.replies
            if replies is None:
                replies = fetch_replies(client, question.channel, question.thread_ts)
            return turns_from(question, replies)
        if question.is_dm:
            response = client.conversations_history(
                channel=question.channel, latest=question.ts, inclusive=False, limit=MAX_TURNS,
                oldest=f"{_ts(question.ts) - DM_HISTORY_WINDOW_S:.6f}",
            )
            messages = list(response.get("messages") or [])
            # The latest earlier question was answered in its thread: that answer is context too.
            latest = max(messages, key=lambda m: _ts(m.get("ts")), default=None)
            if latest and latest.get("reply_count") and not question.from_bot(latest):
                messages += [m for m in fetch_replies(client, question.channel, latest["ts"], pages=1) if m.get("ts") != latest["ts"]]
            return turns_from(question, messages)
    except SlackApiError as exc:
        log.warning("could not read history of %s (%s); answering without it", question.channel, exc.response.get("error"))
    return []


def scope_for(runtime: SlackRuntime, client: WebClient, channel: str, user: str | None, is_dm: bool) -> Scope:
    if not is_dm:
        return Scope(channel=channel)
    restricted = {c for m in runtime.service.manifests().values() if m.restricted for c in m.allowed_channels}
    member_of = runtime.members.channels_of(client, user, restricted) if (user and restricted) else frozenset()
    return Scope(channel=channel, member_of=member_of, is_dm=True)


# --- progress ----------------------------------------------------------------------------------


class StatusReporter:
    """The engine's `on_status` → assistant.threads.setStatus, off the engine's thread, latest text wins.

    `close()` waits for an in-flight update and stops further ones, so no stale "Searching…" can land
    after the reply (Slack clears the status when the reply is posted).
    """

    def __init__(self, runtime: SlackRuntime, client: WebClient, channel: str, thread_ts: str):
        self.runtime, self.client, self.channel, self.thread_ts = runtime, client, channel, thread_ts
        self._pending: str | None = None
        self._sent: str | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()

    def __call__(self, text: str) -> None:
        if not self.runtime.status.enabled:
            return
        with self._lock:
            if self._closed:
                return
            self._pending = text[:100]
        self.runtime.side.submit(self._flush)

    def _flush(self) -> None:
        with self._send_lock:
            with self._lock:
                text, self._pending = self._pending, None
                if self._closed or text is None or text == self._sent:
                    return
            try:
                self.client.assistant_threads_setStatus(channel_id=self.channel, thread_ts=self.thread_ts, status=text)
                self._sent = text
            except SlackApiError as exc:
                self.runtime.status.refused(exc.response.get("error"))
            except Exception as exc:  # a status is never worth failing the answer for
                log.debug("setStatus failed: %s", exc)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        with self._send_lock:
            pass


def add_reaction(client: WebClient, channel: str, ts: str, name: str = "eyes") -> None:
    try:
        client.reactions_add(channel=channel, timestamp=ts, name=name)
    except SlackApiError as exc:
        if exc.response.get("error") != "already_reacted":
            log.debug("reactions.add failed: %s", exc.response.get("error"))


# --- replies -----------------------------------------------------------------------------------


def deliver(
    runtime: SlackRuntime, client: WebClient, question: Question, rendered: RenderedAnswer, say_stream: Callable | None
) -> str | None:
    """Stream the reply where the workspace supports it (chat.startStream…stopStream), else post it."""
    if runtime.streaming.enabled and say_stream is not None:
        streamer = None
        try:
            streamer = say_stream(
                channel=question.channel, thread_ts=question.reply_ts,
                recipient_team_id=question.team, recipient_user_id=question.user,
            )
            streamer.append(markdown_text=rendered.markdown)
            response = streamer.stop(blocks=rendered.footer_blocks or None)
            return response.get("ts") or streamer.ts
        except SlackApiError as exc:
            error = exc.response.get("error")
            if streamer is not None and streamer.ts:  # the stream began: finish it as an ordinary message
                log.warning("chat stream %s failed mid-way (%s); completing with chat.update", streamer.ts, error)
                client.chat_update(channel=question.channel, ts=streamer.ts, text=rendered.text, blocks=rendered.blocks)
                return streamer.ts
            runtime.streaming.refused(error)
            log.info("chat streaming not possible here (%s); posting instead", error)
    response = client.chat_postMessage(
        channel=question.channel, thread_ts=question.reply_ts, text=rendered.text, blocks=rendered.blocks,
        unfurl_links=False, unfurl_media=False,
    )
    return response.get("ts")


def receive(runtime: SlackRuntime, client: WebClient, question: Question, say_stream: Callable | None = None) -> bool:
    """On the listener thread, in milliseconds: claim the message (so it is answered once), show that the
    bot is on it (:eyes: and a status, on the side pool), and queue the answer on the worker pool.
    Returns False when the message was already claimed."""
    if not runtime.ledger.claim(f"message:{question.channel}:{question.ts}"):
        log.info("message %s/%s already being answered", question.channel, question.ts)
        return False
    text = clean_text(question.text, question.bot_user_id)
    if not text:
        runtime.side.submit(_post_quietly, client, question.channel, question.reply_ts, GREETING)
        return True
    status = StatusReporter(runtime, client, question.channel, question.reply_ts)
    runtime.side.submit(add_reaction, client, question.channel, question.ts)
    status(FIRST_STATUS)
    runtime.submit(answer_question, runtime, client, question, text, status, say_stream)
    return True


def _post_quietly(client: WebClient, channel: str, thread_ts: str, text: str) -> None:
    try:
        client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
    except SlackApiError as exc:
        log.warning("could not post to %s: %s", channel, exc.response.get("error"))


def answer_question(
    runtime: SlackRuntime, client: WebClient, question: Question, text: str, status: StatusReporter,
    say_stream: Callable | None = None,
) -> None:
    """On a worker: history from Slack, the scope, the engine, then the reply in the thread."""
    from bot.agent.engine import EmptyQuestion  # loaded already: the engine is built by now or next line

    try:
        history = history_for(client, question)
        scope = scope_for(runtime, client, question.channel, question.user, question.is_dm)
        answer = runtime.engine.answer(text, history, scope=scope, on_status=status)
        answer_id = new_answer_id()
        runtime.records.log_answer(
            answer, answer_id=answer_id, surface=question.surface, channel=question.channel,
            thread_ts=question.reply_ts, user=question.user,
        )
        status.close()
        deliver(runtime, client, question, render_answer(answer, answer_id), say_stream)
    except EmptyQuestion:
        status.close()
        _post_quietly(client, question.channel, question.reply_ts, GREETING)
    except Exception:
        status.close()
        log.exception("answering %s/%s failed", question.channel, question.ts)
        rendered = render_error("Sorry — something went wrong while answering. Please try again in a moment.")
        try:
            client.chat_postMessage(channel=question.channel, thread_ts=question.reply_ts, text=rendered.text, blocks=rendered.blocks)
        except SlackApiError:
            log.exception("could not report the failure to Slack")
