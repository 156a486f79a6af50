"""Routing to the KB that states the answer (issue #13), offline, on small real KBs.

A long reference section that answers a question in one sentence among many scores low as a whole
chunk; a short document of another KB that only shares the question's topic scores higher. The router
also weighs each KB's best answer unit (sentence, list item, table row), so the KB that states the
answer wins.
"""

from __future__ import annotations

import pytest

from bot.agent import routing
from bot.agent.engine import AnswerEngine
from bot.agent.models import KbTarget

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
