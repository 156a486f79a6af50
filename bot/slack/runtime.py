"""What the Slack listeners share: the engine and knowledge service, worker threads, durable state.

Listeners stay short and Slack-shaped: they acknowledge, then hand the slow part (the engine, downloads,
ingestion) to `runtime.submit`, a worker pool separate from Bolt's listener executor — so a burst of
long questions can never delay the ack of a slash command or a modal submission.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlparse

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.config import Settings
from bot.slack.idempotency import ClaimLedger
from bot.slack.records import SlackRecords

log = logging.getLogger(__name__)

# Errors that mean "this workspace/app cannot do that at all", as opposed to "not here, not now".
UNSUPPORTED_ERRORS = {
    "unknown_method", "not_allowed", "feature_not_enabled", "not_allowed_token_type", "missing_scope",
    "access_denied", "method_deprecated", "no_permission", "team_not_allowed",
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


class MembershipCache:
    """Which (restricted-KB) channels a user belongs to, from conversations.members, cached briefly."""

    def __init__(self, ttl_s: float = 300.0):
        self.ttl_s = ttl_s
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def channel_members(self, client: WebClient, channel: str) -> frozenset[str]:
        now = time.monotonic()
        with self._lock:
            cached = self._members.get(channel)
        if cached and now - cached[0] < self.ttl_s:
            return cached[1]
        members: set[str] = set()
        cursor = None
        try:
            for _ in range(50):  # 50 pages of 1,000 members
                response = client.conversations_members(channel=channel, limit=1000, cursor=cursor)
                members.update(response.get("members") or [])
                cursor = (response.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    break
        except SlackApiError as exc:
            # Fail closed: if we cannot see who is in a restricted channel, nobody gets its KB in DMs.
            log.warning("conversations.members %s failed (%s); treating as no members", channel, exc.response.get("error"))
            members = set()
        result = frozenset(members)
        with self._lock:
            self._members[channel] = (now, result)
        return result

    def channels_of(self, client: WebClient, user: str, channels: set[str]) -> frozenset[str]:
        return frozenset(c for c in sorted(channels) if user in self.channel_members(client, c))


@dataclass
class SlackRuntime:
    settings: Settings
    service: object  # tools.service.KnowledgeService
    engine_factory: Callable[[], object]  # builds the AnswerEngine (loads the embedding model: slow)
    ledger: ClaimLedger
    records: SlackRecords
    workers: ThreadPoolExecutor
    side: ThreadPoolExecutor  # small fire-and-forget Slack calls (:eyes:, status updates), never queued behind answers
    streaming: Capability = field(default_factory=lambda: Capability("chat streaming"))
    status: Capability = field(default_factory=lambda: Capability("assistant.threads.setStatus"))
    members: MembershipCache = field(default_factory=MembershipCache)
    _kb_locks: defaultdict = field(default_factory=lambda: defaultdict(threading.Lock))
    _locks_guard: threading.Lock = field(default_factory=threading.Lock)
    _engine: object | None = None
    _engine_lock: threading.Lock = field(default_factory=threading.Lock)
    submitted: int = 0  # background tasks handed to the worker pool (for tests and measurements)
    pending: int = 0  # of which not finished yet

    @property
    def engine(self):  # noqa: ANN201 - bot.agent.engine.AnswerEngine, imported lazily
        """The answer engine, built on first use (so `kbbot serve` listens before the model is loaded)."""
        if self._engine is None:
            with self._engine_lock:
                if self._engine is None:
                    self._engine = self.engine_factory()
        return self._engine

    @property
    def bot_token(self) -> str:
        token = self.settings.slack_bot_token
        return token.get_secret_value() if token else ""

    @property
    def trusted_hosts(self) -> set[str]:
        """Hosts the bot token may be sent to: Slack's, and the configured API host (a test fake)."""
        host = urlparse(self.settings.slack_api_url or "").hostname
        return {host.lower()} if host else set()

    def kb_lock(self, kb: str) -> threading.Lock:
        with self._locks_guard:
            return self._kb_locks[kb]

    def submit(self, fn: Callable, *args, **kwargs) -> Future:
        def guarded():
            try:
                return fn(*args, **kwargs)
            except Exception:
                log.exception("background task %s failed", getattr(fn, "__name__", fn))
                return None
            finally:
                with self._locks_guard:
                    self.pending -= 1

        with self._locks_guard:
            self.submitted += 1
            self.pending += 1
        return self.workers.submit(guarded)

    def idle(self) -> bool:
        with self._locks_guard:
            return self.pending == 0

    def shutdown(self, wait: bool = True) -> None:
        self.workers.shutdown(wait=wait, cancel_futures=not wait)
        self.side.shutdown(wait=wait, cancel_futures=not wait)
        self.ledger.close()


def build_runtime(settings: Settings, service=None, engine=None, workers: int | None = None) -> SlackRuntime:  # noqa: ANN001
    from tools.service import KnowledgeService

    service = service or KnowledgeService(settings)

    def make_engine():  # noqa: ANN202
        if engine is not None:
            return engine
        from bot.agent.engine import AnswerEngine

        return AnswerEngine(service, settings)

    state_dir = settings.resolved_data_dir / "slack"
    workers = workers or settings.slack_workers
    runtime = SlackRuntime(
        settings=settings,
        service=service,
        engine_factory=make_engine,
        ledger=ClaimLedger(state_dir / "deliveries.sqlite3"),
        records=SlackRecords(state_dir),
        workers=ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kbbot-worker"),
        side=ThreadPoolExecutor(max_workers=8, thread_name_prefix="kbbot-side"),
    )
    if not settings.slack_streaming:
        runtime.streaming.enabled = False
        runtime.streaming.reason = "KBBOT_SLACK_STREAMING=off"
    return runtime
