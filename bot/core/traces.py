"""How one recorded answer was found, read back from its stored record (bot.core.records), never from memory.

`AnswerTrace.from_record` turns a stored answer (its columns and its trace JSON) into the typed view a
surface renders: the standalone query, the KBs considered with their scores, each round (query, KBs,
verdict, reason, best evidence) and the citations. It also names every KB the trace mentions, which is
what `permissions.may_see_trace` judges. Records written before the evidence was kept per round still
read: their rounds show the chunk ids and scores they stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from bot.agent.models import Citation, EvidenceNote
from bot.core.origin import Origin, Surface


class BrokenRecord(ValueError):
    """A stored answer that cannot be read back (hand-edited, truncated): shown to nobody."""


@dataclass(frozen=True)
class TracedRound:
    query: str
    kbs: tuple[str, ...]
    sufficient: bool
    reason: str
    policy: str
    evidence: tuple[EvidenceNote, ...]


@dataclass(frozen=True)
class AnswerTrace:
    answer_id: str
    at: float
    asked_in: Origin  # where the answer was given, and to whom
    status: str
    question: str
    standalone_query: str
    mode: str
    route_kbs: tuple[str, ...]
    route_scores: tuple[tuple[str, float], ...]  # every KB considered, best first
    route_method: str
    rounds: tuple[TracedRound, ...]
    citations: tuple[Citation, ...]
    notes: tuple[str, ...]
    total_ms: float | None

    @property
    def answered(self) -> bool:
        return self.status == "answered"

    @property
    def kbs(self) -> frozenset[str]:
        """Every KB this trace names: whoever sees it must be allowed to read each of them."""
        named = set(self.route_kbs) | {kb for kb, _ in self.route_scores} | {c.kb for c in self.citations}
        for r in self.rounds:
            named |= set(r.kbs) | {e.kb for e in r.evidence}
        return frozenset(named)

    @classmethod
    def from_record(cls, record: dict) -> AnswerTrace:
        try:
            trace = record.get("trace") or {}
            route = trace.get("route") or {}
            scores = {str(kb): float(score) for kb, score in (route.get("scores") or {}).items()}
            total = (trace.get("timings_ms") or {}).get("total")
            return cls(
                answer_id=str(record["answer_id"]),
                at=float(record["at"]),
                asked_in=Origin(
                    Surface(record["surface"]),
                    channel=record.get("channel"),
                    user=record.get("user"),
                    thread_ts=record.get("thread_ts"),
                ),
                status=str(record["status"]),
                question=str(record["question"]),
                standalone_query=str(record["standalone_query"]),
                mode=str(record.get("mode") or "offline"),
                route_kbs=_names(route.get("kbs")),
                route_scores=tuple(sorted(scores.items(), key=lambda item: -item[1])),
                route_method=str(route.get("method") or "offline"),
                rounds=tuple(_round(r) for r in trace.get("rounds") or []),
                citations=tuple(_known(Citation, c) for c in record.get("citations") or []),
                notes=tuple(str(n) for n in trace.get("notes") or []),
                total_ms=float(total) if isinstance(total, (int, float)) else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BrokenRecord(f"answer record {record.get('answer_id')!r} cannot be read: {exc}") from None


def _known(cls, data: dict):
    """A dataclass from stored JSON, ignoring keys a later version may have added."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def _names(value: Iterable[object] | None) -> tuple[str, ...]:
    return tuple(str(v) for v in value or [])


def _round(data: dict) -> TracedRound:
    evidence = [_known(EvidenceNote, e) for e in data.get("evidence") or []]
    if not evidence:  # a record from before the evidence was kept: its chunk ids and scores
        scores = data.get("top_scores") or {}
        evidence = [_from_chunk_id(chunk_id, float(score)) for chunk_id, score in scores.items()]
    return TracedRound(
        query=str(data["query"]),
        kbs=_names(data.get("kbs")),
        sufficient=bool(data["sufficient"]),
        reason=str(data.get("reason") or ""),
        policy=str(data.get("policy") or "offline"),
        evidence=tuple(evidence),
    )


def _from_chunk_id(chunk_id: str, score: float) -> EvidenceNote:
    """`kb/document@vN#i` (tools.store.chunk_id_for) → its KB and document."""
    kb, _, rest = str(chunk_id).partition("/")
    document = rest.rsplit("@v", 1)[0] if "@v" in rest else rest
    return EvidenceNote(str(chunk_id), kb, document, "", score, score)
