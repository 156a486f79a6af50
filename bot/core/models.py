"""What the application layer hands to surfaces: the engine's `Answer`, and views of KBs and documents."""

from __future__ import annotations

from dataclasses import dataclass

from bot.agent.models import Answer, Citation, EvidenceNote, RoundTrace, Route, Turn
from bot.core.gaps import Gap, GapsReport
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
    updated_at: float | None = None


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

    @property
    def last_updated(self) -> float | None:
        """When a document of it last went live."""
        return max((d.updated_at for d in self.documents if d.state == "ready" and d.updated_at), default=None)

    @property
    def failed_documents(self) -> tuple[DocView, ...]:
        """Documents that failed, and live ones whose last update failed (their error says so)."""
        return tuple(d for d in self.documents if d.state == "failed" or (d.state == "ready" and d.error))


@dataclass(frozen=True)
class HomeView:
    """What App Home shows one person: the KBs they may read and, for the ones they may change, the gaps."""

    kbs: tuple[KbView, ...]
    gaps: GapsReport | None  # None: they may change no KB
    note: str | None = None  # e.g. memberships could not be checked (restricted KBs left out)


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
    "Citation",
    "DocView",
    "DocumentResult",
    "EvidenceNote",
    "Gap",
    "GapsReport",
    "HomeView",
    "IngestReport",
    "KbView",
    "RoundTrace",
    "Route",
    "Turn",
    "Upload",
    "shorten",
]
