"""'How I found this' and the trust signals in Sources, as pure functions: no Slack, no server, no engine.

Traces are built from answer records shaped as bot.core.records stores them; staleness from document
timestamps and an explicit clock.
"""

from __future__ import annotations

import json
import re

from bot.agent.models import Answer, Citation, RoundTrace, Route
from bot.core import AnswerTrace, Origin
from bot.core.permissions import may_see_trace
from bot.core.trust import DAY_S, annotate, is_stale
from bot.slack.render import STALE_MARK, TRACE_ACTION_ID, render_answer, source_line
from bot.slack.trace import MAX_ROUNDS_SHOWN, trace_blocks, trace_text
from tools.manifests import KnowledgeBaseManifest
from tools.registry import DocumentRecord
from tools.service import KbEntry

NOW = 1_800_000_000.0  # the clock these tests run at (2027-01-15)


def document(name: str, published_days_ago: float | None, uploaded_by: str | None = None) -> DocumentRecord:
    published = None if published_days_ago is None else NOW - published_days_ago * DAY_S
    return DocumentRecord("people", name, "ready", None, 1, "h", 3, None, uploaded_by, published)


def citation(n: int, document: str = "leave.md", **kw) -> Citation:
    return Citation(n, kw.pop("kb", "people"), document, f"people/{document}@v1#0", "Staff get 25 days.", 0.9, "L > A")


# --- trust signals ---------------------------------------------------------------------------------------


def test_a_document_older_than_the_setting_is_marked_stale_and_a_fresh_one_is_not():
    records = [document("old.md", 400), document("fresh.md", 30, uploaded_by="U0HRLEAD01"), document("x.md", None)]
    cited = [citation(1, "old.md"), citation(2, "fresh.md"), citation(3, "x.md"), citation(4, "deleted.md")]
    read = []
    annotate(cited, lambda kb: read.append(kb) or records, NOW, stale_after_days=365)
    old, fresh, unknown, deleted = cited
    assert old.stale and old.updated_at == NOW - 400 * DAY_S and old.uploaded_by is None
    assert not fresh.stale and fresh.uploaded_by == "U0HRLEAD01"
    assert not unknown.stale and unknown.updated_at is None  # no time known: nothing to call old
    assert deleted.updated_at is None and not deleted.stale
    assert read == ["people"]  # each cited KB's documents read once
    # the setting decides: the same 30-day-old document is stale with a 7-day limit
    assert is_stale(fresh.updated_at, NOW, 7) and not is_stale(fresh.updated_at, NOW, 31)


def test_sources_show_the_update_day_the_uploaders_name_and_mark_only_stale_documents():
    stale = citation(1, "old.md")
    stale.updated_at, stale.stale = NOW - 400 * DAY_S, True
    fresh = citation(2, "fresh.md")
    fresh.updated_at, fresh.uploaded_by = NOW - 30 * DAY_S, "U0HRLEAD01"
    stale_line, fresh_line = source_line(stale), source_line(fresh, {"U0HRLEAD01": "Dana <!channel>"})
    assert "updated 2025-12-11" in stale_line and STALE_MARK in stale_line
    assert "updated 2026-12-16" in fresh_line and STALE_MARK not in fresh_line
    assert "uploaded by Dana &lt;!channel&gt;" in fresh_line  # a name, escaped: never a mention that pings
    assert "<@" not in fresh_line and "uploaded" not in stale_line
    unnamed = source_line(fresh)  # the name could not be looked up
    assert "uploaded from Slack" in unnamed and "U0HRLEAD01" not in unnamed
    assert "updated" not in source_line(citation(3))  # a citation without signals looks as before


def answer(status: str = "answered", citations: list[Citation] | None = None) -> Answer:
    return Answer(
        status=status,
        answer="Staff get 25 days [1]." if status == "answered" else "Nothing here.",
        question="q?",
        standalone_query="q",
        route=Route(["people"], {"people": 0.9}),
        rounds=[RoundTrace("q", ["people"], status == "answered", "ok")],
        citations=[citation(1)] if citations is None else citations,
        timings_ms={"total": 10.0},
    )


def test_every_recorded_answer_and_refusal_has_the_how_i_found_this_button():
    for status in ("answered", "insufficient_context"):
        rendered = render_answer(answer(status, None if status == "answered" else []), "a1b2")
        for blocks in (rendered.blocks, rendered.footer_blocks):
            [button] = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
            assert button["action_id"] == TRACE_ACTION_ID and button["value"] == "a1b2"
            assert button["text"]["text"] == "How I found this"
    unrecorded = render_answer(answer(), None)  # nothing to read a trace back from
    assert not [b for b in unrecorded.blocks if b["type"] == "actions"]


# --- traces ------------------------------------------------------------------------------------------------


def record(**overrides) -> dict:
    """An answer record as bot.core.records returns it."""
    evidence = [
        {
            "chunk_id": "people/leave.md@v2#0",
            "kb": "people",
            "document": "leave.md",
            "location": "Leave policy > Annual leave > Entitlement",
            "score": 0.8123,
            "cosine": 0.7011,
        }
    ]
    base = {
        "answer_id": "abc123",
        "at": NOW,
        "surface": "channel",
        "channel": "C0PEOPLE01",
        "thread_ts": "1.1",
        "user": "U0EMPLOY01",
        "question": "and for contractors?",
        "standalone_query": "how many vacation days do contractors get?",
        "status": "answered",
        "answer": "Contractors get none [1].",
        "kbs": ["people"],
        "citations": [
            {
                "n": 1,
                "kb": "people",
                "document": "leave.md",
                "chunk_id": "people/leave.md@v2#0",
                "excerpt": "x",
                "score": 0.8,
                "location": "L",
                "source_url": None,
            }
        ],
        "mode": "offline",
        "rounds": 2,
        "trace": {
            "route": {"kbs": ["people"], "scores": {"product": 0.21, "people": 0.74}, "method": "offline"},
            "searched_kbs": ["people"],
            "rounds": [
                {
                    "query": "how many vacation days do contractors get?",
                    "kbs": ["people"],
                    "sufficient": False,
                    "reason": "best evidence cosine 0.41 is below 0.45",
                    "top_scores": {},
                    "evidence_ids": [],
                    "policy": "offline",
                    "evidence": evidence,
                },
                {
                    "query": "vacation days contractors",
                    "kbs": ["people"],
                    "sufficient": True,
                    "reason": "evidence covers the question",
                    "top_scores": {},
                    "evidence_ids": [],
                    "policy": "offline",
                    "evidence": evidence,
                },
            ],
            "notes": [],
            "timings_ms": {"total": 812.0},
        },
    }
    base.update(overrides)
    return base


def blocks_text(blocks: list[dict]) -> str:
    return "\n".join(
        t
        for b in blocks
        for t in [b.get("text", {}).get("text", "")] + [e.get("text", "") for e in b.get("elements", [])]
    )


def test_a_trace_shows_the_query_the_kbs_considered_each_round_and_its_evidence():
    trace = AnswerTrace.from_record(record())
    blocks = trace_blocks(trace)
    text = blocks_text(blocks)
    assert "*Standalone query:* “how many vacation days do contractors get?”" in text
    assert text.index("`people` 0.740 — searched") < text.index("`product` 0.210")  # best first, chosen marked
    assert "*Round 1* — searched `people` for “how many vacation days do contractors get?”" in text
    assert ":x: not enough evidence: best evidence cosine 0.41 is below 0.45" in text
    assert "*Round 2* — searched `people` for “vacation days contractors”\n:white_check_mark: enough evidence" in text
    assert "`0.812` · *leave.md* · Annual leave › Entitlement · _people_ · cosine 0.701" in text
    assert "Answered, citing [1] leave.md (_people_)" in text and "0.8 s" in text
    assert trace.kbs == {"people", "product"}
    assert trace_text(trace) == "How I found this: how many vacation days do contractors get?"


def test_a_record_from_before_evidence_was_kept_still_shows_its_chunks_and_scores():
    old = record()
    for r in old["trace"]["rounds"]:
        del r["evidence"]
        r["top_scores"] = {"people/leave.md@v2#0": 0.8123}
    old["trace"].pop("searched_kbs")
    trace = AnswerTrace.from_record(old)
    assert [(e.kb, e.document, e.score) for e in trace.rounds[0].evidence] == [("people", "leave.md", 0.8123)]
    assert "`0.812` · *leave.md* · _people_" in blocks_text(trace_blocks(trace))


def test_a_huge_hostile_trace_stays_within_block_kit_limits_and_inert():
    long = "<!channel> " + "x" * 5000
    evidence = [
        {"chunk_id": f"k{i}/d@v1#0", "kb": long, "document": long, "location": long, "score": 0.5, "cosine": 0.4}
        for i in range(60)
    ]
    rounds = [
        {"query": long, "kbs": [long] * 40, "sufficient": False, "reason": long, "policy": "llm", "evidence": evidence}
        for _ in range(80)
    ]
    huge = record(
        question=long,
        standalone_query=long,
        status="insufficient_context",
        citations=[],
        trace={
            "route": {"kbs": [long], "scores": {f"{long}{i}": i / 100 for i in range(200)}, "method": "llm"},
            "rounds": rounds,
            "notes": [long] * 30,
            "timings_ms": {"total": 1.0},
        },
    )
    blocks = trace_blocks(AnswerTrace.from_record(huge))
    assert 0 < len(blocks) <= 50
    for block in blocks:
        texts = [block["text"]["text"]] if block["type"] == "section" else [e["text"] for e in block["elements"]]
        assert block["type"] in ("section", "context") and all(1 <= len(t) <= 3000 for t in texts)
        assert block["type"] != "context" or len(block["elements"]) <= 10
    shown = json.dumps(blocks, ensure_ascii=False)
    assert "<!channel>" not in shown and not re.search(r"<[@#!]", shown)
    assert f"…and {80 - MAX_ROUNDS_SHOWN} more rounds" in shown and "more passages" in shown
    assert "Not answered" in shown


def test_who_may_see_a_trace():
    def entry(name: str, restricted: bool = False) -> KbEntry:
        manifest = KnowledgeBaseManifest(
            name, "d", visibility="restricted" if restricted else "public", allowed_channels=("C0FINANCE1",)
        )
        return KbEntry(name, "d", manifest, None, True)

    entries = {"people": entry("people"), "finance": entry("finance", restricted=True)}
    in_channel = Origin.slack_channel("C0PEOPLE01", "U0EMPLOY01")
    in_finance = Origin.slack_channel("C0FINANCE1", "U0EMPLOY01")
    cfo_dm = Origin.slack_dm("D0CFO00001", "U0CFO00001")
    assert may_see_trace(Origin.slack_channel("C0ENG00001", "U0OTHER001"), in_channel, {"people"}, entries)
    assert not may_see_trace(in_channel, in_finance, {"people", "finance"}, entries)  # restricted, not here
    assert may_see_trace(in_finance, in_finance, {"people", "finance"}, entries)
    assert not may_see_trace(in_channel, in_channel, {"people", "gone"}, entries)  # a KB with no known rules
    assert may_see_trace(cfo_dm, cfo_dm, {"finance"}, entries, frozenset({"C0FINANCE1"}))
    assert not may_see_trace(cfo_dm, cfo_dm, {"finance"}, entries)  # no longer a member
    other = Origin.slack_dm("D0CFO00001", "U0EMPLOY01")
    assert not may_see_trace(other, cfo_dm, {"people"}, entries)  # a DM's answer is its person's
    assert may_see_trace(Origin.cli(), cfo_dm, {"finance", "gone"}, entries)
