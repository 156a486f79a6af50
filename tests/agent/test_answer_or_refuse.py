"""Refuse what the KBs don't say, answer what they do (issue #13, near-misses and answer-type cues).

On a small KB of its own (a benefits-and-platform handbook) and on the sample KBs, offline:

- A word no document uses, right before a kind of thing ("pet insurance", "tertiary on-call", "the magento
  integration", "production-apac"), is a near-miss: refused, and the refusal names what is documented.
  The documented neighbour is still answered.
- A question only one kind of fact answers (how long, how often, how many/much, what day) is refused when
  no sentence of the evidence about it is of that kind ("available on request" is no price).
- A condensed follow-up is held to the names its own message asks about ("what about tier 6?").
- "FY27" is the documents' "FY2027"; an amount the asker brings ("a $900 course") is no name.
- A table row naming every term of the question answers it though it embeds poorly, and the answer then comes
  from that row's document, not from a closer chunk of another one.
"""

from __future__ import annotations

import pytest

from bot.agent import grading
from bot.agent.engine import AnswerEngine
from bot.agent.models import Turn
from tools.search import Evidence
from tools.store import StoredChunk

HANDBOOK = """# Platform and benefits handbook

## Insurance

Every employee gets life insurance of twice their annual salary, and health insurance through Bluestone
Health with dental and vision included. Dependants can be added to the health insurance at enrolment.

## On-call pay

Each team runs a rotation of two people a week. Primary on-call is paid a stipend of $300 per week.
Secondary on-call is paid a stipend of $150 per week. Being paged at night earns a late start the next day.

## Environments

Service code runs in four environments. The production-us environment runs on the k8s-use2 cluster for
customers in the United States, and the production-eu environment runs on the k8s-euc1 cluster for
customers in the European Union. Staging runs on k8s-stg and dev previews on k8s-dev.

## Integrations

The Shopify integration imports new orders every 5 minutes and writes fulfilment back. The WooCommerce
integration imports new orders every 15 minutes. Both are set up from the settings page by an admin.

## Vehicles

Most customers run vans and box trucks. Routing for heavy trailers (height and weight limits) is
available on request from the account team.

## Bastion access

Deploys are run from the bastion host only. Connect with ssh to bastion-01 and run the deploy script from
the release directory; the script refuses to run while another deploy holds the lock.
"""


@pytest.fixture
def handbook_engine(sample_service):
    """An engine over a private copy of the sample store, with the handbook KB added."""
    sample_service.create_kb("handbook", "Benefits, on-call pay, environments, integrations and deploy access.")
    sample_service.ingest_bytes("handbook", "platform-handbook.md", HANDBOOK.encode())
    return AnswerEngine(sample_service)


def _reasons(answer) -> str:
    return " | ".join(r.reason for r in answer.rounds)


# --- a word no document uses, before a kind of thing: a near-miss ---------------------------------


@pytest.mark.parametrize(
    ("question", "missing", "documented"),
    [
        ("does the company pay for pet insurance?", "pet insurance", "insurance"),
        ("what's the stipend for tertiary on-call?", "tertiary on-call", "Secondary on-call"),
        ("how often does the magento integration import orders?", "magento integration", "integration"),
        ("which cluster does production-apac run on?", "production-apac", "production-"),
    ],
)
def test_an_unknown_kind_of_a_documented_thing_is_refused_naming_what_is_documented(
    handbook_engine, question, missing, documented
):
    answer = handbook_engine.answer(question, kb="handbook")

    assert answer.status == "insufficient_context", answer.answer
    assert missing in _reasons(answer), _reasons(answer)
    assert documented.lower() in answer.answer.lower()  # the refusal says what the documents do name


@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("does the company pay for health insurance?", "Bluestone"),
        ("what's the stipend for secondary on-call?", "$150"),
        ("how often does the woocommerce integration import orders?", "every 15 minutes"),
        ("which cluster does production-eu run on?", "k8s-euc1"),
    ],
)
def test_the_documented_kind_is_still_answered(handbook_engine, question, fact):
    answer = handbook_engine.answer(question, kb="handbook")

    assert answer.status == "answered", _reasons(answer)
    assert fact in answer.answer


# --- answer-type cues: a question only one kind of fact answers -----------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "how much extra does routing for heavy trailers cost?",  # "available on request": no price
        "how long does an ssh session on bastion-01 stay open?",  # no time limit is stated
    ],
)
def test_a_question_for_a_figure_or_a_duration_the_evidence_lacks_is_refused(handbook_engine, question):
    answer = handbook_engine.answer(question, kb="handbook")

    assert answer.status == "insufficient_context", answer.answer
    assert "gives no" in _reasons(answer), _reasons(answer)


def test_the_figure_the_evidence_states_is_answered(handbook_engine):
    answer = handbook_engine.answer("how much is primary on-call paid per week?", kb="handbook")

    assert answer.status == "answered", _reasons(answer)
    assert "$300" in answer.answer


def test_required_kinds():
    assert grading.cues.required_kind("how long are tokens valid?")[0] == "duration"
    assert grading.cues.required_kind("what day does the report come out?")[0] == "day, date or time"
    # "when" is often a condition ("when does legal review a contract?" — above $100,000): any fact may do
    assert grading.cues.required_kind("when does legal have to look at a contract?") == ("", None)


def test_question_words_are_not_terms_an_answer_repeats():
    assert grading.asked_terms("what's the max someone should be primary?") == {"max", "someon", "primari"}
    assert "mani" not in grading.asked_terms("how many vehicles can you have on starter?")


# --- on the sample KBs: follow-ups, fiscal years, amounts -----------------------------------------


def test_a_follow_up_is_held_to_the_names_its_own_message_asks_about(offline_engine):
    first = "what's the nightly hotel cap in tier 2 cities?"
    opening = offline_engine.answer(first)
    assert opening.status == "answered", opening.answer
    history = [Turn("user", first), Turn("assistant", opening.answer)]

    answer = offline_engine.answer("and tier 6?", history)

    assert answer.status == "insufficient_context", answer.answer
    assert "tier 6" in _reasons(answer).lower()
    assert "Tier 1" in answer.answer  # what the policy does define


def test_a_short_fiscal_year_is_the_documents_long_one(offline_engine):
    assert grading.spellings("FY27") == ["FY27", "FY2027"]
    answer = offline_engine.answer("what's the total revenue target for FY27?")

    assert answer.status == "answered", _reasons(answer)
    assert answer.citations[0].kb == "finance"


def test_an_amount_the_asker_brings_is_no_name():
    assert grading.specific_terms("do I need approval before booking a $900 course?") == []
    assert grading.specific_terms("what did the 2025 plan say?") == ["2025"]


# --- a unit naming every term of the question: answered, from that unit's document ----------------


def _evidence(document: str, text: str, cosine: float, coverage: float) -> Evidence:
    chunk = StoredChunk(f"kb/{document}@v1#0", "kb", document, 1, 0, document, "", text)
    return Evidence(chunk, score=cosine, cosine=cosine, bm25=0.0, coverage=coverage)


def test_a_row_naming_every_term_answers_and_its_document_leads():
    query = "what do test keys start with?"
    closer = _evidence("onboarding.md", "Your first week starts with a laptop and a welcome session.", 0.29, 0.3)
    row = "Live keys start with lf_live_ and test keys start with lf_test_."
    reference = _evidence("api-reference.md", f"API keys\n{row}", 0.27, 1.0)
    units = [grading.UnitMatch(1, row, 0.40, 1.0, typed=False)]

    verdict = grading.grade_offline(query, [closer, reference], lambda term: True, units)

    assert verdict.sufficient, verdict.reason
    assert verdict.relevant_ids == (reference.chunk_id,)  # the closer chunk of another document does not lead
    far = [grading.UnitMatch(1, row, 0.20, 1.0, typed=False)]
    assert not grading.grade_offline(query, [closer, reference], lambda term: True, far).sufficient
