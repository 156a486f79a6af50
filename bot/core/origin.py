"""Where a request comes from: the one fact every access decision starts from."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Surface(StrEnum):
    CLI = "cli"  # the operator's own command line: trusted, sees and changes every KB
    EVAL = "eval"  # a benchmark run: trusted, limited to the KBs its case names
    CHANNEL = "channel"  # a Slack channel (or a thread in one)
    DM = "dm"  # a direct message with the bot
    ASSISTANT = "assistant"  # Slack's assistant pane (a DM-like thread, with the channel the user is viewing)
    HOME = "home"  # the app's Home tab: one person, no conversation


@dataclass(frozen=True)
class Origin:
    surface: Surface
    channel: str | None = None  # the Slack conversation it was asked in
    user: str | None = None  # the Slack user asking
    thread_ts: str | None = None  # the thread it belongs to, if any
    context_channel: str | None = None  # assistant pane: the channel the user is looking at
    kbs: frozenset[str] | None = None  # eval: exactly these KBs

    @classmethod
    def cli(cls) -> Origin:
        return cls(Surface.CLI)

    @classmethod
    def eval(cls, kbs: frozenset[str] | set[str] | list[str]) -> Origin:
        return cls(Surface.EVAL, kbs=frozenset(kbs))

    @classmethod
    def slack_channel(cls, channel: str, user: str | None, thread_ts: str | None = None) -> Origin:
        return cls(Surface.CHANNEL, channel=channel, user=user, thread_ts=thread_ts)

    @classmethod
    def slack_dm(cls, channel: str, user: str | None, thread_ts: str | None = None) -> Origin:
        return cls(Surface.DM, channel=channel, user=user, thread_ts=thread_ts)

    @classmethod
    def slack_assistant(
        cls, channel: str, user: str | None, thread_ts: str | None = None, context_channel: str | None = None
    ) -> Origin:
        return cls(Surface.ASSISTANT, channel=channel, user=user, thread_ts=thread_ts, context_channel=context_channel)

    @classmethod
    def slack_home(cls, user: str) -> Origin:
        return cls(Surface.HOME, user=user)

    @property
    def trusted(self) -> bool:
        """A local surface run by whoever runs kbbot (no Slack user to check)."""
        return self.surface in (Surface.CLI, Surface.EVAL)

    @property
    def private(self) -> bool:
        """A conversation with one person, where KBs follow that person's channel memberships."""
        return self.surface in (Surface.DM, Surface.ASSISTANT, Surface.HOME)

    @property
    def recorded(self) -> bool:
        """Answers given here are recorded (for feedback, traces and knowledge gaps)."""
        return not self.trusted
