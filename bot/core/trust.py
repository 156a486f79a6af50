"""Trust signals on citations: when each cited document was last updated, who uploaded it, whether it is old.

The engine cites chunks; how fresh their documents are is the registry's knowledge, added here so every
surface (Slack's Sources, the console, `kbbot ask --json`) shows the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from bot.agent.models import Citation
from tools.registry import DocumentRecord

DAY_S = 86_400.0


def is_stale(updated_at: float | None, now: float, stale_after_days: float) -> bool:
    """Older than the limit. A document with no known update time is not called stale (nothing to go on)."""
    return updated_at is not None and now - updated_at > stale_after_days * DAY_S


def annotate(
    citations: Sequence[Citation],
    documents_of: Callable[[str], Iterable[DocumentRecord]],
    now: float,
    stale_after_days: float,
) -> None:
    """Fill each citation's `updated_at`, `uploaded_by` and `stale` from its document's registry record
    (each cited KB's documents are read once)."""
    by_kb: dict[str, Mapping[str, DocumentRecord]] = {}
    for citation in citations:
        if citation.kb not in by_kb:
            by_kb[citation.kb] = {d.name: d for d in documents_of(citation.kb)}
        record = by_kb[citation.kb].get(citation.document)
        if record is None:  # deleted since it was retrieved: nothing to say about it
            continue
        citation.updated_at = record.published_at
        citation.uploaded_by = record.uploaded_by
        citation.stale = is_stale(record.published_at, now, stale_after_days)
