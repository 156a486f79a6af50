"""What the Slack listeners need, in one typed object handed to each package's `register(app, deps)`.

Listeners stay short and Slack-shaped: they acknowledge, then hand slow work (history reads, the engine,
downloads, ingestion) to the bounded pools here, never running it on Bolt's listener threads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from bot.config import Settings
from bot.core import AskResult, KnowledgeBot, Origin, Turn
from bot.core.answer_processes import AnswerProcesses
from bot.slack.assistant_threads import PaneThreads
from bot.slack.idempotency import ClaimLedger
from bot.slack.people import SlackPeople
from bot.slack.work import TrackedExecutor, WorkPool, start_threads

log = logging.getLogger(__name__)

SIDE_WORKERS = 8  # small fire-and-forget Slack calls (:eyes:, status updates)
LISTENER_WORKERS = 16  # Bolt's listener threads

# Errors that mean "this workspace/app cannot do that at all", as opposed to "not here, not now".
UNSUPPORTED_ERRORS = {
    "unknown_method",
    "not_allowed",
    "feature_not_enabled",
    "not_allowed_token_type",
    "missing_scope",
    "access_denied",
    "method_deprecated",
    "no_permission",
    "team_not_allowed",
}


@dataclass
class Capability:
    """A Slack feature used when the workspace supports it, switched off after the first hard refusal."""

    name: str
    enabled: bool = True
    reason: str | None = None

    def refused(self, error: str | None) -> None:
        if error in UNSUPPORTED_ERRORS and self.enabled:
            self.enabled = False
            self.reason = error
            log.warning("Slack %s unavailable (%s); using the fallback from now on", self.name, error)


@dataclass
class SlackDeps:
    settings: Settings
    bot: KnowledgeBot
    ledger: ClaimLedger
    answers: WorkPool  # questions (bounded: a full pool means "busy, try again")
    ingests: WorkPool  # uploads and deletes, on their own few threads
    side: ThreadPoolExecutor  # small fire-and-forget calls (:eyes:, status updates)
    listeners: TrackedExecutor  # Bolt's listener threads: they only acknowledge and hand work on
    pane_threads: PaneThreads = field(default_factory=lambda: PaneThreads(None))  # assistant-pane threads
    streaming: Capability = field(default_factory=lambda: Capability("chat streaming"))
    status: Capability = field(default_factory=lambda: Capability("assistant.threads.setStatus"))
    people: SlackPeople | None = None  # uploaders' names for Sources (set by build_slack)
    answerer: AnswerProcesses | None = None  # KBBOT_ANSWER_PROCESSES: questions answered in worker processes

    def ask(self, origin: Origin, question: str, history: Sequence[Turn] = (), **options: Any) -> AskResult:
        """KnowledgeBot.ask, in an answering process when there are some (same rules, same result)."""
        return (self.answerer or self.bot).ask(origin, question, history, **options)

    @property
    def bot_token(self) -> str:
        token = self.settings.slack_bot_token
        return token.get_secret_value() if token else ""

    @property
    def trusted_hosts(self) -> set[str]:
        """Hosts the bot token may be sent to: Slack's, and the configured API host (a test fake)."""
        host = urlparse(self.settings.slack_api_url or "").hostname
        return {host.lower()} if host else set()

    def idle(self) -> bool:
        return self.listeners.pending == 0 and self.answers.idle() and self.ingests.idle()

    def start_threads(self) -> None:
        """Every pool's threads started before the first event arrives (see work.start_threads)."""
        self.answers.start_threads()
        start_threads(self.side, SIDE_WORKERS)
        start_threads(self.listeners, LISTENER_WORKERS)

    def shutdown(self, timeout_s: float = 0.0) -> bool:
        """Let every acknowledged request reach a pool, then let the pools finish what they accepted — all
        within timeout_s — and close the ledger last. True if everything finished (a question still held is
        answered at the next start)."""
        deadline = time.monotonic() + timeout_s
        finished = self.listeners.wait_idle(timeout_s)
        self.answers.close()
        self.ingests.close()
        finished &= self.answers.drain(max(0.0, deadline - time.monotonic()))
        finished &= self.ingests.drain(max(0.0, deadline - time.monotonic()))
        if self.answerer is not None:
            self.answerer.close()
        self.side.shutdown(wait=finished, cancel_futures=not finished)
        self.listeners.shutdown(wait=False, cancel_futures=True)
        self.ledger.close()
        self.pane_threads.close()
        return finished


def build_deps(settings: Settings, bot: KnowledgeBot) -> SlackDeps:
    state_dir = settings.resolved_data_dir / "slack"
    deps = SlackDeps(
        settings=settings,
        bot=bot,
        ledger=ClaimLedger(state_dir / "deliveries.sqlite3"),
        answers=WorkPool("kbbot-answer", settings.slack_workers, settings.slack_queue),
        ingests=WorkPool("kbbot-ingest", settings.slack_ingest_workers, 32),
        side=ThreadPoolExecutor(max_workers=SIDE_WORKERS, thread_name_prefix="kbbot-side"),
        listeners=TrackedExecutor(max_workers=LISTENER_WORKERS, thread_name_prefix="bolt-listener"),
        pane_threads=PaneThreads(state_dir / "assistant_threads.sqlite3"),
    )
    if not settings.slack_streaming:
        deps.streaming.enabled = False
        deps.streaming.reason = "KBBOT_SLACK_STREAMING=off"
    return deps
