"""Routing to the KB that states the answer (issue #13), offline, on small real KBs.

A long reference section that answers a question in one sentence among many scores low as a whole
chunk; a short document of another KB that only shares the question's topic scores higher. The router
also weighs each KB's best answer unit (sentence, list item, table row), so the KB that states the
answer wins.
"""

from __future__ import annotations

import pytest

from bot.agent import answering, routing
from bot.agent.engine import AnswerEngine
from bot.agent.models import KbTarget
from tools.search import Evidence, SearchResult
from tools.store import StoredChunk

# An API reference: the concurrency limit is one sentence of a long section about other limits.
API_REFERENCE = """# Dispatch API reference

## Limits and idempotency

POST requests accept an Idempotency-Key header. The service remembers each key for 24 hours and
returns the first response again when a request is retried with the same key and the same body; a
different body with a reused key is rejected with 409 idempotency_conflict. Keys are scoped to the API
key that sent them, so two integrations never collide. List endpoints return 50 records per page by
default and at most 200, with a cursor in the next field; cursors expire after one hour. Requests are
limited to 600 per minute per API key, and a 429 response carries a Retry-After header in seconds.
Customers can run up to 10 optimization jobs concurrently; further jobs wait in a queue. Webhook
deliveries are signed with HMAC-SHA256 and retried with exponential backoff for up to 24 hours. Bulk
exports are generated asynchronously and their download links stay valid for 7 days.
"""

# A postmortem: about optimization jobs and a customer, but it never says how many may run at once.
POSTMORTEM = """# Postmortem: optimizer queue backlog

On 12 August route optimization jobs queued for up to 25 minutes because a customer's bulk import
created 9,400 optimization requests in ten minutes and the optimizer workers did not autoscale.
"""

QUESTION = "how many optimization jobs can a customer run at the same time?"


@pytest.fixture
def two_kb_engine(service):
    service.create_kb("platform", "Customer-facing documentation of the dispatch product and its API.")
    service.ingest_bytes("platform", "api-reference.md", API_REFERENCE.encode())
    service.create_kb("operations", "Internal engineering runbooks, incidents and postmortems.")
    service.ingest_bytes("operations", "optimizer-postmortem.md", POSTMORTEM.encode())
    return AnswerEngine(service)


def test_the_kb_whose_sentence_answers_outranks_one_that_shares_the_topic(two_kb_engine):
    targets = {name: KbTarget(name, "") for name in ("platform", "operations")}
    probes = two_kb_engine.prober.probe(QUESTION, list(targets), targets)

    # As whole chunks the postmortem looks closer: this is the case the answer units are for.
    assert probes["operations"].chunk_score > probes["platform"].chunk_score
    assert probes["platform"].best_unit is not None
    assert routing.rank_probes(list(probes.values()))[0].kb == "platform"


def test_the_answer_comes_from_the_kb_that_states_it(two_kb_engine):
    answer = two_kb_engine.answer(QUESTION)

    assert answer.route.kbs[0] == "platform", answer.route
    assert answer.status == "answered", answer.answer
    assert answer.citations[0].document == "api-reference.md"
    assert "10 optimization jobs" in answer.answer


def test_without_unit_vectors_a_kb_is_scored_by_its_best_chunk(two_kb_engine):
    targets = {name: KbTarget(name, "") for name in ("platform", "operations")}
    probe = two_kb_engine.prober.probe(QUESTION, ["operations"], targets)["operations"]

    assert probe.evidence_score >= probe.chunk_score
    assert routing.KbProbe("operations", probe.result, 0.0).evidence_score == pytest.approx(probe.chunk_score)


# Within one KB: the onboarding guide talks about your new laptop; the equipment policy states how often
# laptops are replaced, in one sentence of a long section.
ONBOARDING = """# Onboarding guide

## Your laptop

Your new laptop is shipped to your home address so that it arrives five business days before your
start date. Your new laptop comes with the standard apps installed; sign in to the new laptop with the
temporary password from your welcome email and change it on the first day.
"""

EQUIPMENT = """# Remote work and equipment

## Company equipment

Company equipment stays the property of the company and is returned when you leave, in the prepaid box
the IT team sends. Monitors, headsets, keyboards and docking stations are ordered from the equipment
portal within the spending limits of the current year, and receipts are not needed for portal orders.
Laptops are refreshed every 3 years. Lost or stolen equipment is reported to the IT service desk within
24 hours, with a police report for a theft, and the device is wiped remotely.
"""

REFRESH_QUESTION = "how often are laptops replaced?"


@pytest.fixture
def people_engine(service):
    service.create_kb("people", "HR policies.")
    service.ingest_bytes("people", "onboarding.md", ONBOARDING.encode())
    service.ingest_bytes("people", "equipment.md", EQUIPMENT.encode())
    return AnswerEngine(service)


def test_the_chunk_whose_sentence_answers_goes_first_in_the_evidence(people_engine):
    searched = people_engine.searcher.search(REFRESH_QUESTION, "people", k=8)
    targets = {"people": KbTarget("people", "")}
    probed = people_engine.prober.probe(REFRESH_QUESTION, ["people"], targets)["people"]

    # The search ranks the whole chunk that repeats the question's words first ...
    assert searched.evidence[0].chunk.document == "onboarding.md"
    # ... the probe's evidence (the round's) leads with the chunk whose sentence states the answer.
    assert probed.result.evidence[0].chunk.document == "equipment.md"
    scores = [e.score for e in probed.result.evidence]
    assert scores == sorted(scores, reverse=True)


def test_the_answer_leads_with_the_document_that_states_it(people_engine):
    answer = people_engine.answer(REFRESH_QUESTION)

    assert answer.status == "answered", answer.answer
    assert answer.citations[0].document == "equipment.md"
    assert "every 3 years" in answer.answer


QUERY_8K = "who approves an 8k expense claim?"


def test_a_kb_whose_best_passage_leaves_the_subject_elsewhere_is_not_searched_alone() -> None:
    # "who approves an 8k expense claim?": the spend policy (finance) scored just above the expenses policy
    # (people) and was searched alone, though its best passage says expense claims are the other's business.
    def probe(kb: str, text: str, cosine: float) -> routing.KbProbe:
        stored = StoredChunk(f"{kb}/doc.md@v1#0", kb, "doc.md", 1, 0, "doc", "doc", text)
        return routing.KbProbe(kb, SearchResult(kb, "q", [Evidence(stored, 1.0, cosine, 1.0)]), 0.0)

    spend = (
        "This policy sets who must approve purchase commitments. It does not cover employee expense claims, "
        "which follow the expenses policy in the People handbook."
    )
    probes = [probe("finance", spend, 0.60), probe("people", "Over $7,500: the VP Finance approves.", 0.50)]
    assert routing.choose_kbs(probes) == ["finance"]
    disclaiming = [p.kb for p in probes if answering.leaves_to_another(p.result.evidence[0].chunk.text, QUERY_8K)]
    assert disclaiming == ["finance"]
    assert routing.choose_kbs(probes, disclaiming) == ["finance", "people"]
    assert not answering.leaves_to_another(spend, "who approves a $40,000 software contract?")
