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
    # read whole: "$2,001" was the amount 2 and a name "001" the documents never mention, so the claim was refused
    assert grading.specific_terms("expense claim for $2,001 - who has to approve it?") == []
    assert grading.specific_terms("what's new in release 4.13?") == ["4.13"]


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


# --- the asked-for attribute must be stated about the asked-about thing (issue #13, ook-fact) -------

WORKSPACE_GUIDE = """# Workspace guide

## Tokens and webhooks

Each workspace can have at most 20 active tokens. Webhook endpoints are registered under Settings > Webhooks
by a workspace admin, and every endpoint gets its own signing secret.

## Retirement

The pension plan is administered by Harbor Trust. Staff are enrolled in the first month after they join.

## Badges

A replacement badge costs $15, paid at the front desk.

## Build servers

The documentation site is built with Python 3.11. The build servers run in the ci-east cluster, which the
platform team looks after.

## Reports

Stale feature flags are listed in the weekly cleanup report, which the platform team reviews.
"""

FINANCE_CALENDAR = """# Finance calendar

The monthly finance report is sent to budget owners by the 5th business day of the month. Forecasts are
refreshed every quarter.
"""


@pytest.fixture
def guide_engine(sample_service):
    """An engine over a private copy of the sample store, with a small made-up workspace guide added."""
    sample_service.create_kb("guide", "Workspace tokens, webhooks, pension, badges, build servers and reports.")
    sample_service.ingest_bytes("guide", "workspace-guide.md", WORKSPACE_GUIDE.encode())
    sample_service.ingest_bytes("guide", "finance-calendar.md", FINANCE_CALENDAR.encode())
    return AnswerEngine(sample_service)


@pytest.mark.parametrize(
    ("question", "missing"),
    [
        # the documents name the plan and who runs it, never a fee
        ("what's the pension plan's admin fee?", "gives no price"),
        # the cluster is named, its version is not (its name's digits are no version)
        ("what kubernetes version does the ci-east cluster run?", "gives no version"),
        # "at most 20 active tokens" counts tokens, not the webhook endpoints the same section names
        ("how many webhook endpoints can a workspace register?", "gives no count of webhook endpoints"),
        # a day is stated for another document's report, not for this one
        ("what day does the flag cleanup report come out?", "gives no day"),
    ],
)
def test_an_attribute_no_sentence_states_about_the_thing_is_refused(guide_engine, question, missing):
    answer = guide_engine.answer(question, kb="guide")

    assert answer.status == "insufficient_context", answer.answer
    assert missing in _reasons(answer), _reasons(answer)


@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("what's the fee for a replacement badge?", "$15"),
        ("what python version is the documentation site built with?", "3.11"),
        ("how many active tokens can a workspace have?", "20"),
    ],
)
def test_the_attribute_a_sentence_states_is_answered(guide_engine, question, fact):
    answer = guide_engine.answer(question, kb="guide")

    assert answer.status == "answered", _reasons(answer)
    assert fact in answer.answer


def test_what_asks_for_a_price_a_version_or_a_count():
    assert grading.cues.required_kind("what's the admin fee?")[0] == "price"
    assert grading.cues.required_kind("what does the starter plan cost per month?")[0] == "price"
    assert grading.cues.required_kind("what action was taken on price controls?") == ("", None)  # no price asked
    assert grading.cues.required_kind("which postgres version is the db on?")[0] == "version"
    assert grading.counted_terms("how many webhook endpoints can I add?", lambda term: True) == (
        "webhook endpoints",
        {"webhook", "endpoint"},
    )
    # a word the KB never uses is the asker's own ("trucks" for "vehicles"): the count is not held to it
    assert grading.counted_terms("how many trucks on starter?", lambda term: term != "truck") == ("", set())
    assert grading.counts("Each account can have at most 10 active keys.", {"key"})
    assert grading.counts("Route class: optimize; Token cost per request: 10", {"token"})
    assert not grading.counts("Each account can have at most 10 active keys.", {"webhook", "endpoint"})
    assert not grading.counts("Lumen Dispatch API Reference v2 Webhooks", {"webhook"})  # a code's digits


# --- a variant of a documented family, judged where the family is named -----------------------------


def test_a_variant_name_is_judged_in_the_passages_that_name_its_siblings():
    deploy = _evidence(
        "deploy.md",
        "The production-us environment runs on k8s-use2 for customers in the US data region, and "
        "production-eu on k8s-euc1 for customers in the EU data region.",
        0.45,
        0.5,
    )
    sales = _evidence("sales-plan.md", "The APAC sales team targets 22 new logos this year.", 0.30, 0.25)
    # "apac" is a word of the KBs searched (the sales plan's), but not of the deploy guide's environments
    known = lambda term: True  # noqa: E731

    assert grading.unnamed_kinds("which cluster does production-apac run on?", [deploy, sales], known) == [
        "production-apac"
    ]
    assert grading.unnamed_kinds("where is the apac data region hosted?", [deploy, sales], known) == [
        "apac data region"
    ]
    assert grading.unnamed_kinds("which cluster does production-eu run on?", [deploy, sales], known) == []
    assert grading.unnamed_kinds("where is the eu data region hosted?", [deploy, sales], known) == []


def test_a_condensed_follow_up_is_held_to_the_thing_its_own_message_names():
    pricing = _evidence("pricing.md", "Starter plan: $29 per vehicle a month. Growth plan: $59 per vehicle.", 0.5, 0.5)

    verdict = grading.grade_offline(
        "how much is premium per vehicle?", [pricing], lambda term: True, asked="and the premium plan?"
    )

    assert not verdict.sufficient
    assert "premium plan" in verdict.reason


def test_a_tier_suffix_the_documents_never_give_a_name_is_a_near_miss():
    pricing = _evidence(
        "pricing.md",
        "Basic: up to 25 vehicles. Scale: up to 200 vehicles.\n- Everything in Scale, plus geofences and analytics.",
        0.5,
        0.5,
    )

    assert grading.near_misses("how many vehicles do you get on scale plus?", [pricing]) == ["scale plus"]
    assert grading.near_misses("how many vehicles do you get on scale?", [pricing]) == []
    assert grading.near_misses("is there a plus side to more vehicles?", [pricing]) == []  # no name before it


def test_a_coded_period_and_a_measure_stated_apart_are_not_the_measure_of_that_period():
    plan = _evidence("plan.md", "Metric | FY2031 plan\nMargin | 12%\nOPEX | $40M", 0.5, 0.5)
    quarters = _evidence("quarters.md", "Quarter: Q2 FY2031; Revenue target: $9M", 0.45, 0.5)
    units = [
        grading.UnitMatch(0, "Metric: OPEX; FY2031 plan: $40M", 0.55, 0.67, typed=True),
        grading.UnitMatch(1, "Quarter: Q2 FY2031; Revenue target: $9M", 0.50, 0.67, typed=True),
    ]

    assert grading.names_apart("what's the OPEX target for Q2 FY2031?", units, [plan, quarters]) == [
        "Q2",
        "FY2031",
        "OPEX",
    ]
    assert grading.names_apart("what OPEX is planned for FY2031?", units, [plan, quarters]) == []
    assert grading.names_apart("what's the revenue target for Q2 FY2031?", units, [plan, quarters]) == []
    # an amount is no name: "over 5s" need not be written as such
    assert grading.names_apart("which SEV is p99 over 5s?", units, [plan, quarters]) == ["p99", "SEV"]


@pytest.mark.parametrize(
    "sentence",
    ["Every plan starts with a 14-day free trial.", "Refunds are possible within a two-week window."],
)
def test_a_duration_written_as_a_compound_supplies_a_how_long(sentence):
    # "14-day" is as much a duration as "14 days": a trial length written so was refused as "gives no duration"
    assert grading.cues.supplies(sentence, grading.cues.expected_answers("how long is the free trial?"))


def test_a_hyphenated_number_that_is_no_duration_supplies_none():
    assert not grading.cues.supplies(
        "Use the 2-factor login on bastion-01.", grading.cues.expected_answers("how long is the free trial?")
    )


# --- words the asker types that are no names the documents must repeat (session 19, near-miss precision) ---


def test_a_clock_time_or_a_multiplier_is_no_name_the_evidence_must_repeat():
    oncall = _evidence("oncall.md", "Paged between 22:00 and 07:00? You may start late the next day.", 0.5, 0.4)
    limits = _evidence("limits.md", "Overrides up to 3x can be set by any engineer; above 3x needs the lead.", 0.5, 0.5)

    assert grading.near_misses("got paged at 3am, can i start late?", [oncall]) == []
    assert grading.near_misses("paged at 11:30pm, can i start late?", [oncall]) == []
    assert grading.near_misses("who approves a 5x override?", [limits]) == []
    assert grading.near_misses("who approves a 2.5x override?", [limits]) == []
    # a code is still a name: a severity or a host the evidence never names is a near miss
    assert "sev5" in grading.near_misses("who approves a 5x override for the sev5?", [limits])


def test_a_code_in_the_plural_is_the_code_the_documents_name():
    levels = _evidence("severity.md", "SEV1: engaged within 5 minutes. SEV2: postmortem required.", 0.5, 0.5)

    assert grading.near_misses("do sev2s need a postmortem?", [levels]) == []
    assert grading.near_misses("how fast are SEV1s picked up?", [levels]) == []
    # the plural of a code no document names is still a near miss
    assert grading.near_misses("do sev5s need a postmortem?", [levels]) == ["sev5s"]


def test_a_shortened_word_of_the_documents_before_a_kind_is_that_kind():
    cards = _evidence("expenses.md", "The standard monthly limit of a Corporate Card is $5,000.", 0.5, 0.5)
    known = lambda term: term not in {"corp", "platinum", "pro"}  # noqa: E731

    assert grading.unnamed_kinds("what's the monthly limit on the corp card?", [cards], known) == []
    assert grading.unnamed_kinds("what's the limit on corp cards?", [cards], known) == []
    # a word the documents never use before the kind, or too short to stand for one, is still a near miss
    assert grading.unnamed_kinds("what's the limit on the platinum card?", [cards], known) == ["platinum card"]
    assert grading.unnamed_kinds("what's the limit on the pro card?", [cards], known) == ["pro card"]


def test_a_word_capitalised_only_where_a_line_begins_takes_no_tier_suffix():
    equipment = _evidence(
        "equipment.md", "Item | Limit\nHeadset | $120\nKeyboard and mouse | $150\n- Medical cover: Bluestone.", 0.5, 0.5
    )
    pricing = _evidence("pricing.md", "Starter: up to 25 vehicles.\n- Everything in Starter, plus geofences.", 0.5, 0.5)

    assert grading.tier_variants("and keyboard plus mouse?", [equipment.chunk.text]) == []
    assert grading.tier_variants("what share of the medical premium is paid?", [equipment.chunk.text]) == []
    # a name the documents write mid-sentence still takes no suffix they never give it
    assert grading.tier_variants("how many vehicles on starter plus?", [pricing.chunk.text]) == ["starter plus"]


def test_a_plan_named_by_what_the_documents_call_its_cover_is_documented():
    benefits = _evidence(
        "benefits.md",
        "You can choose between two plans: a traditional plan and a high-deductible plan. Dental cover is provided "
        "by Bluestone Dental. Lumen pays $2,000 per year into your HSA for family coverage.",
        0.5,
        0.5,
    )

    assert grading.near_misses("what's the yearly max on the dental plan?", [benefits]) == []
    assert grading.near_misses("how much goes in my hsa on the family plan?", [benefits]) == []
    # a word the documents never use about a plan or its cover is still a plan they do not have
    assert grading.near_misses("what's the deductible on the platinum plan?", [benefits]) == ["platinum plan"]
