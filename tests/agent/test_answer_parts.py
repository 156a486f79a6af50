"""A question that asks several things at once ("how long, and can I extend it?") gets each part answered from its
own best unit, in the question's order: chosen by the part's own words (a word counting as the start of a longer
one), its asked type, its meaning by itself, and for a table row how fully the part names the row's label."""

from __future__ import annotations

import numpy as np
import pytest

from bot.agent import answering
from tools.search import Evidence
from tools.store import StoredChunk


def chunk(document: str, text: str, location: str = "", kb: str = "handbook") -> StoredChunk:
    return StoredChunk(f"{kb}/{document}@v1#0", kb, document, 1, 0, document, location or document, text)


@pytest.fixture(scope="module")
def answer(agent_service):
    """The offline answer to `question` from one passage, scored as the engine scores it: by its words and, with
    the real sentence model, by meaning (the question's, and each asked part's by itself)."""
    embedder = agent_service.embedder

    def answer(question: str, document: str, text: str, location: str) -> str:
        evidence = [Evidence(chunk(document, text, location), 0.9, 0.6, 3.0)]
        draft = answering.extractive_answer(
            question,
            evidence,
            embedder.embed_query(question),
            lambda texts: np.stack([embedder.embed_query(t) for t in texts]),
        )
        assert draft is not None
        return draft.text

    return answer


RELEASES = (
    "Merge the pull request once CI is green. Let the build soak on staging for 30 minutes. The automatic smoke "
    "suite must pass before production is unlocked. EU deploys start one hour after the US promotion."
)


def test_a_parts_word_counts_as_the_start_of_a_longer_one(answer) -> None:
    # "prod" is how people write "production": the smoke-suite sentence answers the second part.
    text = answer(
        "how long does a build sit on staging and what must pass before prod?",
        "releases.md",
        RELEASES,
        "Releases > Standard path",
    )
    assert text.startswith("Let the build soak on staging for 30 minutes."), text
    assert "smoke suite must pass before production" in text, text


PAGING = (
    "Alerts page the primary on-call first. When the pager goes off you must acknowledge within 5 minutes. "
    "Pages and their acknowledgements are logged for the weekly review. If not acknowledged, the secondary on-call "
    "is paged."
)


def test_each_part_is_answered_by_a_unit_of_its_asked_type(answer) -> None:
    # "how fast" asks for a duration, "if I don't" for a consequence: the units that state them, in that order.
    text = answer(
        "how fast do i need to ack a page and who gets paged if i don't?", "paging.md", PAGING, "On-call > Paging"
    )
    assert text.startswith("When the pager goes off you must acknowledge within 5 minutes."), text
    assert "the secondary on-call is paged" in text, text


TARGETS = """| Metric | 2025 actual | 2026 target |
|---|---|---|
| Net revenue retention | 110% | 115% |
| Gross revenue churn | 9% | below 8% |
| Recognised revenue | $50.0M | $62.0M |
| Ending ARR | $58.0M | $70.0M |
"""


def test_a_part_gets_the_table_row_its_words_name_best(answer) -> None:
    # Three rows have "revenue"; "the revenue target" names the row labelled "Recognised revenue" more fully than
    # "Net revenue retention" or "Gross revenue churn".
    text = answer("what's the revenue target and the ending ARR target?", "targets.md", TARGETS, "Targets > Headline")
    assert "$62.0M" in text and "$70.0M" in text, text
    assert text.index("$62.0M") < text.index("$70.0M"), "parts in the question's order"
    assert "115%" not in text.split("[1]")[0], text


LEAVE = (
    "The secondary carer receives 6 weeks of fully paid leave. The primary carer receives 16 weeks of fully paid "
    "leave. They may extend with up to 8 further weeks at half pay. Leave must be taken within a year of the birth."
)


def test_a_part_said_in_other_words_is_found_by_its_own_meaning(answer) -> None:
    # No sentence has "stretch": the part's own vector finds "They may extend…", which the whole question's misses.
    text = answer(
        "how long does the primary carer get, and can i stretch it?", "parental.md", LEAVE, "Parental leave > How much"
    )
    assert text.startswith("The primary carer receives 16 weeks"), text
    assert "8 further weeks at half pay" in text, text


APPROVALS = """| Commitment value | Required approvers |
|---|---|
| Up to $10,000 | Budget owner |
| $10,000.01 to $50,000 | Budget owner and department VP |
| $50,000.01 to $250,000 | Budget owner, department VP and CFO |
| Above $250,000 | All of the above and the CEO |
"""


def test_an_amount_is_answered_by_the_row_whose_range_holds_it(answer) -> None:
    # Every row shares the question's words; only one holds $30k.
    text = answer("who has to approve a $30k purchase?", "approvals.md", APPROVALS, "Approvals > Matrix")
    assert text.startswith("Commitment value: $10,000.01 to $50,000; Required approvers: Budget owner and"), text
    text = answer("who signs off on a 400k contract?", "approvals.md", APPROVALS, "Approvals > Matrix")
    assert text.startswith("Commitment value: Above $250,000; Required approvers: All of the above and the CEO"), text


def test_parts_typed_with_an_ampersand_or_a_plus_are_parts() -> None:
    assert [p.text for p in answering.asked_parts("per diem + hotel cap for london?")] == [
        "per diem",
        "hotel cap for london",
    ]
    assert [p.text for p in answering.asked_parts("starter price & vehicle limit?")] == [
        "starter price",
        "vehicle limit",
    ]
    assert answering.asked_parts("what is the P&L impact?") == [], "an ampersand inside a word joins nothing"


GATEWAY = (
    "Fail-open mode is shown in red on the gateway dashboard. If a cache call "
    "takes longer than 50 ms, the gateway fails open and allows the request. The API Platform primary is paged "
    "after 2 minutes of fail-open mode."
)


def test_a_when_part_is_answered_by_the_condition_that_sets_it_off(answer) -> None:
    # No unit states a time: "when does it fail open?" is answered by the condition that sets it off, not by the
    # dashboard line that names the same thing.
    text = answer("when does the gateway fail open, and who gets paged?", "gateway.md", GATEWAY, "Gateway > Failing")
    assert text.startswith("If a cache call takes longer than 50 ms"), text
    assert "primary is paged" in text, text


@pytest.mark.timeout(60)
def test_a_pasted_paragraph_of_many_clauses_is_answered_as_one_question(answer) -> None:
    # A whole conversation or a pasted paragraph joins many clauses with "and": choosing a unit for each jointly
    # grew as PART_OPTIONS ** clauses (4 ** 14 here) and did not end (seen on MTRAG-UN's whole conversations).
    teams = ("billing", "routing", "mobile", "search", "payments", "identity", "reporting", "platform")
    passage = " ".join(f"The {t} team deploys on weekdays and reviews its alerts weekly." for t in teams)
    policies = "travel expense leave laptop remote oncall release hiring bonus pension parking training privacy dress"
    pasted = " and ".join(f"what is the {p} policy" for p in policies.split()) + "?"
    assert "[1]" in answer(pasted, "teams.md", passage, "Teams")
    assert len(answering._PART_BREAK.split(pasted)) > answering.MAX_PARTS
    assert answering.asked_parts(pasted) == []


def test_a_question_words_one_noun_and_another_are_one_part() -> None:
    # "what day and time" asks one thing (when the handoff is), not "what day" and "time is the handoff".
    parts = answering.asked_parts("what day and time is the oncall handoff and how often can one person be primary?")
    assert [p.text for p in parts] == ["what day and time is the oncall handoff", "how often can one person be primary"]
    assert [p.text for p in answering.asked_parts("which plan and what price?")] == ["which plan", "what price"]
    assert [p.text for p in answering.asked_parts("what's the per diem and the hotel cap?")] == [
        "what's the per diem",
        "the hotel cap",
    ]
