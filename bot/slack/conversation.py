"""A Slack message → a question for the application layer → a threaded reply.

History comes from Slack itself (`conversations.replies` for threads, `conversations.history` for DMs),
not from process memory, so a restart loses no context. Where the message was asked decides what may be
searched (`Origin`); the application layer applies the rules.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import islice
from typing import Literal, overload

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import Answer, EmptyQuestion, KnowledgeBaseError, Origin, Turn
from bot.core.answer_processes import Stopping
from bot.slack import builders
from bot.slack.deps import SlackDeps
from bot.slack.markup import clean_text
from bot.slack.render import RenderedAnswer, render_answer, render_error, shorten
from bot.slack.work import fire_and_forget

log = logging.getLogger(__name__)

MAX_TURNS = 10
DM_HISTORY_WINDOW_S = 30 * 60  # earlier top-level DM messages count as context for this long
FIRST_STATUS = "Searching the knowledge bases…"
GREETING = (
    "Hi! Ask me a question and I'll answer from the knowledge bases, with sources. Try `/kb help` for uploads and more."
)
BUSY = ":hourglass: I'm answering a lot of questions right now — please ask again in a minute."
FAILED = "Sorry — something went wrong while answering. Please try again in a moment."
REPLY_EVENT = "kbbot_reply"
GREETING_EVENT = "kbbot_greeting"  # the assistant pane's greeting: not a turn of the conversation
NOTICE_EVENT = "kbbot_notice"  # a one-line notice (attachments are not read): not a turn either
ASSISTANT = "assistant"  # Question.surface of a question asked in the assistant pane
TITLE_CHARS = 80
UNAVAILABLE = "I can't reach the knowledge bases right now. Please try again in a minute."


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
    text: str  # as Slack sent it (markup included)
    ts: str
    thread_ts: str | None  # the thread the message is in, if any
    is_dm: bool
    team: str | None
    surface: str  # "mention" | "dm" | "thread" | "assistant" | "autoreply" | "shortcut" ("Ask kbbot about this")
    bot_user_id: str | None = None
    bot_id: str | None = None
    replies: list[dict] | None = None  # the thread, when already fetched
    context_channel: str | None = None  # assistant pane: the channel the user is looking at
    has_files: bool = False  # files came with the question (they are not read: the asker is told so)

    @property
    def key(self) -> str:
        """What the delivery ledger claims: one answer per message (and one more when asked about it with the
        shortcut — the message itself may have been a question answered, or silently not, before)."""
        kind = "shortcut" if self.surface == "shortcut" else "message"
        return f"{kind}:{self.channel}:{self.ts}"

    @property
    def quiet(self) -> bool:
        """Nobody asked kbbot (auto-reply): it shows only an answer — no :eyes:, no status, no refusal, no
        "busy"."""
        return self.surface == "autoreply"

    def to_payload(self) -> dict:
        """What a restart needs to answer it (the thread is read again then)."""
        return {k: v for k, v in asdict(self).items() if k != "replies"}

    @classmethod
    def from_payload(cls, payload: dict) -> Question:
        return cls(**payload)

    @property
    def reply_metadata(self) -> dict:
        """Carried by the reply (Slack message metadata): a restart knows which question a reply answers."""
        return {"event_type": REPLY_EVENT, "event_payload": {"question_ts": self.ts}}

    def answered_by(self, message: dict) -> bool:
        metadata = message.get("metadata") or {}
        return (
            metadata.get("event_type") == REPLY_EVENT
            and (metadata.get("event_payload") or {}).get("question_ts") == self.ts
        )

    @property
    def notice_metadata(self) -> dict:
        return {"event_type": NOTICE_EVENT, "event_payload": {"question_ts": self.ts}}

    @property
    def reply_ts(self) -> str:
        """Replies always go in the message's thread (a new one for a top-level message)."""
        return self.thread_ts or self.ts

    @property
    def in_pane(self) -> bool:
        return self.surface == ASSISTANT

    @property
    def origin(self) -> Origin:
        if self.in_pane:
            return Origin.slack_assistant(self.channel, self.user, self.reply_ts, self.context_channel)
        if self.is_dm:
            return Origin.slack_dm(self.channel, self.user, self.reply_ts)
        return Origin.slack_channel(self.channel, self.user, self.reply_ts)

    def from_bot(self, message: dict) -> bool:
        return bool(
            (self.bot_user_id and message.get("user") == self.bot_user_id)
            or (self.bot_id and message.get("bot_id") == self.bot_id)
        )


# --- Slack reads -------------------------------------------------------------------------------


def fetch_replies(client: WebClient, channel: str, thread_ts: str, pages: int = 5) -> list[dict]:
    responses = client.conversations_replies(channel=channel, ts=thread_ts, limit=200, include_all_metadata=True)
    return [m for page in islice(responses, pages) for m in page.get("messages") or []]


def bot_in_thread(question: Question, replies: list[dict]) -> bool:
    return any(question.from_bot(m) for m in replies)


def turns_from(question: Question, messages: list[dict]) -> list[Turn]:
    """Messages before this one → turns, oldest first; other bots and system messages are skipped. Asked
    about with the shortcut, the whole thread around the message is its history."""
    turns: list[Turn] = []
    whole_thread = question.surface == "shortcut"
    for message in sorted(messages, key=lambda m: _ts(m.get("ts"))):
        if message.get("ts") == question.ts or (_ts(message.get("ts")) > _ts(question.ts) and not whole_thread):
            continue
        if (message.get("metadata") or {}).get("event_type") in (GREETING_EVENT, NOTICE_EVENT):
            continue
        if message.get("subtype") == "assistant_app_thread":  # a pane thread's root: Slack's, not a turn
            continue
        if question.from_bot(message):
            role = "assistant"
        elif message.get("bot_id") or message.get("subtype") not in (None, "thread_broadcast", "file_share"):
            continue
        else:
            role = "user"
        text = clean_text(message.get("text"))
        if text:
            turns.append(Turn(role, text))
    return turns[-MAX_TURNS:]


def history_for(client: WebClient, question: Question) -> list[Turn]:
    try:
        if question.thread_ts or question.surface == "shortcut":
            replies = question.replies
            if replies is None:
                replies = fetch_replies(client, question.channel, question.reply_ts)
            return turns_from(question, replies)
        if question.is_dm:
            response = client.conversations_history(
                channel=question.channel,
                latest=question.ts,
                inclusive=False,
                limit=MAX_TURNS,
                oldest=f"{_ts(question.ts) - DM_HISTORY_WINDOW_S:.6f}",
            )
            messages = list(response.get("messages") or [])
            # The latest earlier question was answered in its thread: that answer is context too.
            latest = max(messages, key=lambda m: _ts(m.get("ts")), default=None)
            if latest and latest.get("reply_count") and not question.from_bot(latest):
                messages += [
                    m
                    for m in fetch_replies(client, question.channel, latest["ts"], pages=1)
                    if m.get("ts") != latest["ts"]
                ]
            return turns_from(question, messages)
    except Exception as exc:  # Slack refused, or the network failed: the question still gets its answer
        log.warning("could not read history of %s (%s); answering without it", question.channel, slack_error(exc))
    return []


# --- progress ----------------------------------------------------------------------------------


class StatusReporter:
    """The engine's `on_status` → assistant.threads.setStatus, off the engine's thread, latest text wins.

    `close()` waits for an in-flight update and stops further ones, so no stale "Searching…" can land
    after the reply (Slack clears the status when the reply is posted).
    """

    def __init__(
        self, deps: SlackDeps, client: WebClient, channel: str, thread_ts: str, loading_messages: bool = False
    ):
        self.deps, self.client, self.channel, self.thread_ts = deps, client, channel, thread_ts
        self.loading_messages = loading_messages  # the assistant pane shows them in place of the status line
        self._pending: str | None = None
        self._sent: str | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()

    def __call__(self, text: str) -> None:
        if not self.deps.status.enabled:
            return
        with self._lock:
            if self._closed:
                return
            queued = self._pending is not None  # a flush is queued already and will send the latest text
            self._pending = shorten(text, 100)
        if not queued:
            fire_and_forget(self.deps.side, self._flush)

    def _flush(self) -> None:
        with self._send_lock:
            with self._lock:
                text, self._pending = self._pending, None
                if self._closed or text is None or text == self._sent:
                    return
            try:
                extra = {"loading_messages": [text]} if self.loading_messages else {}
                self.client.assistant_threads_setStatus(
                    channel_id=self.channel, thread_ts=self.thread_ts, status=text, **extra
                )
                self._sent = text
            except SlackApiError as exc:
                self.deps.status.refused(exc.response.get("error"))
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


# --- the one ask flow ----------------------------------------------------------------------------


@overload
def ask(
    deps: SlackDeps,
    origin: Origin,
    text: str,
    history: list[Turn],
    on_status: Callable[[str], None] | None = None,
    on_answer: Callable[[Answer], None] | None = None,
    only_if_answered: Literal[False] = False,
) -> RenderedAnswer: ...


@overload
def ask(
    deps: SlackDeps,
    origin: Origin,
    text: str,
    history: list[Turn],
    on_status: Callable[[str], None] | None = None,
    on_answer: Callable[[Answer], None] | None = None,
    only_if_answered: bool = False,
) -> RenderedAnswer | None: ...


def ask(
    deps: SlackDeps,
    origin: Origin,
    text: str,
    history: list[Turn],
    on_status: Callable[[str], None] | None = None,
    on_answer: Callable[[Answer], None] | None = None,
    only_if_answered: bool = False,
) -> RenderedAnswer | None:
    """Ask the application layer and render the answer (recorded there, with the id the buttons carry);
    anything unexpected becomes an apology, never a crash or an exception's text. `on_answer` sees the
    answer before it is rendered (the assistant pane titles its thread with the standalone query). With
    `only_if_answered` (auto-reply) everything but a cited answer is None: nothing is said, nothing recorded."""
    try:
        result = deps.ask(origin, text, history, on_status=on_status, silent_refusals=only_if_answered)
        if only_if_answered and result.answer.status != "answered":
            return None
        if on_answer is not None:
            on_answer(result.answer)
    except EmptyQuestion:
        return None if only_if_answered else RenderedAnswer(text=GREETING, markdown=GREETING)
    except Stopping:
        raise  # not an answer: the question stays held for the next start
    except KnowledgeBaseError as exc:  # the store is unreachable or refuses: the operator's log says why
        log.error("answering in %s failed: %s", origin.channel, exc)
        return None if only_if_answered else render_error(UNAVAILABLE)
    except Exception:
        log.exception("answering in %s failed", origin.channel)
        return None if only_if_answered else render_error(FAILED)
    return render_answer(result.answer, result.answer_id, people=uploader_names(deps, result.answer.citations))


def uploader_names(deps: SlackDeps, citations: list) -> dict[str, str]:
    """Display names of the people who uploaded the cited documents (none when they cannot be looked up)."""
    if deps.people is None:
        return {}
    return deps.people.names_of(c.uploaded_by for c in citations if c.uploaded_by)


# --- replies -----------------------------------------------------------------------------------


def deliver(
    deps: SlackDeps, client: WebClient, question: Question, rendered: RenderedAnswer, say_stream: Callable | None
) -> str | None:
    """Stream the reply where the workspace supports it (chat.startStream…stopStream), else post it."""
    if deps.streaming.enabled and say_stream is not None and rendered.blocks:
        streamer = None
        try:
            streamer = say_stream(
                channel=question.channel,
                thread_ts=question.reply_ts,
                recipient_team_id=question.team,
                recipient_user_id=question.user,
            )
            streamer.append(markdown_text=rendered.markdown)
            response = streamer.stop(blocks=rendered.footer_blocks or None, metadata=question.reply_metadata)
            return response.get("ts") or streamer.ts
        except SlackApiError as exc:
            error = exc.response.get("error")
            if streamer is not None and streamer.ts:  # the stream began: finish it as an ordinary message
                log.warning("chat stream %s failed mid-way (%s); completing with chat.update", streamer.ts, error)
                client.chat_update(
                    channel=question.channel,
                    ts=streamer.ts,
                    text=rendered.text,
                    blocks=rendered.blocks,
                    metadata=question.reply_metadata,
                )
                return streamer.ts
            deps.streaming.refused(error)
            log.info("chat streaming not possible here (%s); posting instead", error)
    response = client.chat_postMessage(
        channel=question.channel,
        thread_ts=question.reply_ts,
        text=rendered.text,
        blocks=rendered.blocks or None,
        metadata=question.reply_metadata,
        unfurl_links=False,
        unfurl_media=False,
    )
    return response.get("ts")


def post_quietly(
    client: WebClient, channel: str, thread_ts: str | None, text: str, metadata: dict | None = None
) -> None:
    try:
        client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, text=text, metadata=metadata, unfurl_links=False, unfurl_media=False
        )
    except Exception as exc:  # Slack refused, or the network failed
        log.warning("could not post to %s: %s", channel, slack_error(exc))


def slack_error(exc: Exception) -> str:
    """What went wrong with a Web API call, in a word (Slack's error code, or the exception's type)."""
    return str(exc.response.get("error")) if isinstance(exc, SlackApiError) else type(exc).__name__


def receive(deps: SlackDeps, client: WebClient, question: Question, say_stream: Callable | None = None) -> bool:
    """Claim the message (so it is answered once), show that the bot is on it (:eyes: and a status, on the
    side pool) and queue the answer — or say the bot is busy. False when it was already claimed."""
    if not deps.ledger.claim(question.key):
        log.info("message %s/%s already being answered", question.channel, question.ts)
        return False
    if question.has_files:
        fire_and_forget(deps.side, say_files_not_read, client, question)
    text = clean_text(question.text)
    if not text:
        if not question.has_files and not question.quiet:  # a file alone was just told how uploads work
            fire_and_forget(deps.side, post_quietly, client, question.channel, question.reply_ts, GREETING)
        return True
    deps.ledger.hold(question.key, question.to_payload())
    status = status_for(deps, client, question)
    if question.quiet:
        status.close()  # no "Searching…" under a message nobody addressed to kbbot
    if not deps.answers.submit(answer_question, deps, client, question, text, status, say_stream):
        if question.quiet:
            deps.ledger.release(question.key)
        else:
            fire_and_forget(deps.side, say_busy, deps, client, question)
        return True
    if not question.quiet:
        if not question.in_pane:  # the pane shows the status with its loading messages instead
            fire_and_forget(deps.side, add_reaction, client, question.channel, question.ts)
        status(FIRST_STATUS)
    return True


def status_for(deps: SlackDeps, client: WebClient, question: Question) -> StatusReporter:
    return StatusReporter(deps, client, question.channel, question.reply_ts, loading_messages=question.in_pane)


def set_title(client: WebClient, question: Question, answer: Answer) -> None:
    """The pane thread's title: the question as it stands alone, short."""
    title = shorten(" ".join((answer.standalone_query or clean_text(question.text)).split()), TITLE_CHARS)
    if not title:
        return
    try:
        client.assistant_threads_setTitle(channel_id=question.channel, thread_ts=question.reply_ts, title=title)
    except Exception as exc:  # a title is never worth failing the answer for
        log.info("assistant.threads.setTitle failed: %s", slack_error(exc))


def answer_question(
    deps: SlackDeps,
    client: WebClient,
    question: Question,
    text: str,
    status: StatusReporter,
    say_stream: Callable | None = None,
) -> None:
    """On a worker: history from Slack, the answer, then the reply in the thread; the claim is released once
    the reply is out (a restart answers it if this process dies first)."""
    on_answer = (lambda answer: set_title(client, question, answer)) if question.in_pane else None
    try:
        rendered = ask(
            deps,
            question.origin,
            text,
            history_for(client, question),
            status,
            on_answer,
            only_if_answered=question.quiet,
        )
    except Stopping:
        log.info("kbbot stopped before answering %s/%s (answered at the next start)", question.channel, question.ts)
        return  # held, not released
    finally:
        status.close()
    if rendered is None:  # auto-reply with no answer: silence
        deps.ledger.release(question.key)
        return
    try:
        deliver(deps, client, question, rendered, say_stream)
    except Exception:  # Slack refused, or the network failed: nothing more this process can do for it
        log.exception("could not reply in %s/%s", question.channel, question.reply_ts)
    deps.ledger.release(question.key)


def say_files_not_read(client: WebClient, question: Question) -> None:
    post_quietly(client, question.channel, question.reply_ts, builders.FILES_NOT_READ, question.notice_metadata)


def say_busy(deps: SlackDeps, client: WebClient, question: Question) -> None:
    post_quietly(client, question.channel, question.reply_ts, BUSY, question.reply_metadata)
    deps.ledger.release(question.key)


def answer_if_in_thread(
    deps: SlackDeps, client: WebClient, question: Question, say_stream: Callable | None = None
) -> None:
    """On a worker: a thread reply without a mention is answered only in threads the bot answered in."""
    try:
        question.replies = fetch_replies(client, question.channel, question.thread_ts or question.ts)
    except SlackApiError as exc:
        log.warning("could not read thread %s/%s (%s)", question.channel, question.thread_ts, exc.response.get("error"))
        return
    if bot_in_thread(question, question.replies) and deps.ledger.claim(question.key):
        if question.has_files:
            say_files_not_read(client, question)
        text = clean_text(question.text)
        if text:
            deps.ledger.hold(question.key, question.to_payload())
            fire_and_forget(deps.side, add_reaction, client, question.channel, question.ts)
            answer_question(deps, client, question, text, status_for(deps, client, question), say_stream)
