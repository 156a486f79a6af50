"""What the application layer hands to surfaces: the engine's `Answer`, and views of KBs and documents."""

from __future__ import annotations

from dataclasses import dataclass

from bot.agent.models import Answer, Citation, RoundTrace, Route, Turn
from tools.ingest import DocumentResult, IngestReport
from tools.parsing import SUPPORTED_SUFFIXES
from tools.text import shorten


@dataclass(frozen=True)
class AskResult:
    answer: Answer
    answer_id: str | None  # set where answers are recorded (Slack), for feedback and traces


@dataclass(frozen=True)
class DocView:
    name: str
    state: str  # "ready" | "processing" | "failed"
    chunks: int
    error: str | None
    source_url: str | None


@dataclass(frozen=True)
class KbView:
    """A KB as one origin may see it."""

    name: str
    description: str
    restricted: bool
    may_upload: bool
    documents: tuple[DocView, ...]
    channels: tuple[str, ...]  # where it is searched first
    note: str | None = None  # a problem worth telling this origin (broken declaration, other embedding model)

    @property
    def ready_documents(self) -> int:
        return sum(d.state == "ready" for d in self.documents)

    @property
    def chunks(self) -> int:
        return sum(d.chunks for d in self.documents if d.state == "ready")


@dataclass(frozen=True)
class ChannelKb:
    """A KB a channel searches first, and why: its kb.toml names the channel, or someone added it from Slack."""

    name: str
    declared: bool
    added_by: str | None = None


@dataclass(frozen=True)
class ChannelView:
    """How one channel is set up, as a person in it may see it."""

    channel: str
    searched_first: tuple[ChannelKb, ...]
    also_readable: tuple[str, ...]  # the other KBs that may be searched here
    autoreply: bool


@dataclass(frozen=True)
class Upload:
    """One file to add: its name in the KB, its bytes, and where people can see it (a Slack permalink)."""

    name: str
    data: bytes
    source_url: str | None = None


__all__ = [
    "SUPPORTED_SUFFIXES",
    "Answer",
    "AskResult",
    "ChannelKb",
    "ChannelView",
    "Citation",
    "DocView",
    "DocumentResult",
    "IngestReport",
    "KbView",
    "RoundTrace",
    "Route",
    "Turn",
    "Upload",
    "shorten",
]
