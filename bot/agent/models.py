"""The data that flows through the agent, and the one `Answer` every surface renders."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Role = Literal["user", "assistant"]
Status = Literal["answered", "insufficient_context"]


class EmptyQuestion(ValueError):
    """Nothing to answer: the question has no words."""


@dataclass(frozen=True)
class Turn:
    role: Role
    text: str

    @classmethod
    def from_json(cls, data: dict) -> Turn:
        if not isinstance(data, dict):
            raise ValueError(f"a history turn must be an object {{role, text}}, not {data!r:.60}")
        role = data.get("role")
        if role not in ("user", "assistant"):
            raise ValueError(f"history turn role must be 'user' or 'assistant', not {role!r}")
        return cls(role, str(data.get("text") or ""))


@dataclass(frozen=True)
class KbTarget:
    """A knowledge base a question may use, as the router sees it."""

    name: str
    description: str


@dataclass
class Citation:
    n: int
    kb: str
    document: str
    chunk_id: str
    excerpt: str
    score: float
    location: str
    source_url: str | None = None
    # Trust signals, filled in by the application layer from the document registry: when the cited
    # document's live version went live (epoch seconds), who uploaded it from Slack, and whether it is
    # older than KBBOT_STALE_AFTER_DAYS.
    updated_at: float | None = None
    uploaded_by: str | None = None
    stale: bool = False


@dataclass
class EvidenceNote:
    """One retrieved chunk as a round's trace keeps it: enough to show where it came from and how it scored."""

    chunk_id: str
    kb: str
    document: str
    location: str
    score: float
    cosine: float


@dataclass
class Route:
    kbs: list[str]
    scores: dict[str, float]
    method: str = "offline"  # "offline" | "llm" | "pinned"


@dataclass
class RoundTrace:
    query: str
    kbs: list[str]
    sufficient: bool
    reason: str
    top_scores: dict[str, float] = field(default_factory=dict)
    evidence_ids: list[str] = field(default_factory=list)
    policy: str = "offline"  # which policy graded this round: "offline" | "llm"
    evidence: list[EvidenceNote] = field(default_factory=list)  # the round's best chunks (TRACE_EVIDENCE)
    features: dict[str, float] = field(default_factory=dict)  # what grading measured (sufficiency.py), offline
    sufficiency: float | None = None  # the fitted model's score of them (recorded beside the rules' verdict)


@dataclass
class Answer:
    # The workflow runtime writes a summary (the repr) of its result into the run's span: the trace parts (route,
    # rounds with their evidence, citations, timings) are left out of the repr, which they made kilobytes long.
    status: Status
    answer: str
    question: str
    standalone_query: str
    route: Route = field(repr=False)
    rounds: list[RoundTrace] = field(repr=False)
    citations: list[Citation] = field(repr=False)
    timings_ms: dict[str, float] = field(repr=False)
    mode: Literal["offline", "llm"] = "offline"
    language: str = "en"
    notes: list[str] = field(default_factory=list)  # e.g. "question truncated", "LLM unavailable: offline"
    searched_kbs: list[str] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return self.status == "answered"

    def to_json(self) -> dict:
        return asdict(self)
