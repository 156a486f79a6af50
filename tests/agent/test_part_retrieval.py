"""A question of several asked parts is searched part by part too (in the routed KBs, one batched encode for the
parts' queries): each part's own chunks sit beside the whole question's evidence, each part is graded on them,
a part no evidence supports is named as missing, and a question none of whose parts is supported is refused."""

from __future__ import annotations

import pytest

from bot.agent import answering
from bot.agent.engine import AnswerEngine

# A made-up lending library: many passages share the words of "borrow a camera kit with lenses and batteries", so the
# whole question's search is full of them; the refund is one sentence of a finance-desk passage about other things.
SECTIONS = [
    (
        "What a camera kit includes",
        "A camera kit includes one mirrorless body, two lenses, three batteries and a padded bag for location shoots.",
    ),
    (
        "Who can borrow a camera kit",
        "Any permanent employee can borrow a camera kit with lenses and batteries for a location shoot.",
    ),
    (
        "Camera kit deposit",
        "The deposit for borrowing a camera kit is $250, taken from your expense card when you collect the kit.",
    ),
    ("Loan length", "You can borrow a camera kit with its lenses and batteries for up to 14 days per location shoot."),
    (
        "Booking",
        "Book a camera kit, extra lenses or spare batteries in the lending portal at least 2 days before a "
        "location shoot.",
    ),
    (
        "Collecting",
        "Collect the camera kit, lenses and batteries from the second-floor studio desk between 09:00 and 17:00.",
    ),
    ("Damage", "Report damage to a camera kit, its lenses or batteries within 24 hours of the location shoot."),
    ("Lost kit", "A lost camera kit, lens or battery is charged to your cost centre at its replacement value."),
    (
        "Insurance",
        "Every camera kit, with its lenses and batteries, is insured for shoots in the office and on location.",
    ),
    ("Extra lenses", "Borrow extra lenses for a camera kit for a location shoot at no additional deposit."),
    (
        "Batteries",
        "Charge all camera kit batteries before a location shoot; spare batteries can be borrowed from the "
        "studio desk.",
    ),
    ("Drones", "Drone kits are not part of the camera kit library and need a separate licence."),
    (
        "Tripods",
        "Tripods are borrowed with a camera kit for a location shoot and returned with its lenses and batteries.",
    ),
    (
        "Finance desk",
        "The finance desk handles mileage claims, supplier invoices and purchase orders for every team. "
        "Mileage is claimed monthly in the expenses tool. Supplier invoices go to the accounts payable mailbox. "
        "Purchase orders above $5,000 need a second approver. Once the studio desk has checked everything in, the "
        "refund is paid to your expense card within 10 business days. Questions about payroll go to the people team, "
        "not here.",
    ),
]
LIBRARY = "# Camera kit lending library\n\n" + "\n\n".join(f"## {h}\n\n{t}" for h, t in SECTIONS) + "\n"
REFUND = "the refund is paid to your expense card within 10 business days"


@pytest.fixture
def studio_engine(sample_service):
    """An engine over a private copy of the sample store, with the made-up lending library added."""
    sample_service.create_kb("studio", "Camera kit lending library: loans, deposits, bookings, returns.")
    sample_service.ingest_bytes("studio", "camera-kits.md", LIBRARY.encode())
    return AnswerEngine(sample_service)


def test_a_part_whose_answer_the_whole_question_does_not_retrieve_is_answered_from_its_own_search(studio_engine):
    question = (
        "what deposit do i pay when i borrow a camera kit with lenses and batteries for a location shoot, "
        "and when is the refund paid?"
    )
    # The premise: the evidence the whole question answers from lacks the refund; the part's own search finds it.
    probes = studio_engine.prober.probe(question, ["studio"], {})
    whole = answering.select_evidence(probes["studio"].result.evidence)
    assert not any(REFUND in e.chunk.text for e in whole), [e.chunk.text[:40] for e in whole]
    parts = studio_engine.part_evidence(question, question, ["studio"])
    refund_part = next(p for p in parts if p.text == "when is the refund paid")
    assert REFUND in refund_part.evidence[0].chunk.text

    answer = studio_engine.answer(question, kb="studio")
    assert answer.status == "answered", answer.answer
    assert "$250" in answer.answer and "within 10 business days" in answer.answer, answer.answer
    refund = next(c for c in answer.citations if "10 business days" in c.excerpt)
    assert f"[{refund.n}]" in answer.answer and refund.document == "camera-kits.md"
    assert "don't say" not in answer.answer, answer.answer


def test_a_part_no_evidence_supports_is_named_as_missing(studio_engine):
    answer = studio_engine.answer("what deposit do i pay to borrow a camera kit and can i bring my dog?", kb="studio")
    assert answer.status == "answered", answer.answer
    assert answer.answer.startswith("The deposit for borrowing a camera kit is $250"), answer.answer
    assert answer.answer.endswith("These sources don't say anything about “can i bring my dog”."), answer.answer


def test_a_question_none_of_whose_parts_is_supported_is_refused(studio_engine):
    answer = studio_engine.answer("how much is the gym membership and who runs the canteen?", kb="studio")
    assert answer.status == "insufficient_context", answer.answer


def test_a_later_part_is_searched_with_the_subject_only_when_it_leans_on_it():
    searches = answering.part_searches("what's the 401k match and how long until it vests?")
    assert [s.query for s in searches] == ["what's the 401k match", "how long until it vests 401k match"]
    # "at what valuation" names one thing: the subject comes from the first part ("D" is a search term too).
    searches = answering.part_searches("series D: how much are we raising and at what valuation?")
    assert searches[1].query == "at what valuation series D raising"
    # A part that names its own subject is searched by itself.
    searches = answering.part_searches("what's the camera kit deposit and how many business days until the refund?")
    assert searches[1].query == "how many business days until the refund"
    assert answering.part_searches("how many vacation days do I get?") == []
    # At most three parts are searched.
    assert len(answering.part_searches("the hotel cap and the meal cap and the taxi cap and the train class?")) == 3


def test_parts_answer_a_question_refused_only_for_the_kind_of_fact_asked():
    from bot.agent.grading import Verdict, with_parts

    answered, refused = Verdict(True, "strong match"), Verdict(False, "weak evidence")
    untyped = Verdict(False, "the evidence found gives no duration for it", untyped="duration")
    verdict = with_parts(untyped, [("what's the match", answered), ("how long until it vests", refused)])
    assert verdict.sufficient and verdict.by_parts and verdict.unsupported_parts == ("how long until it vests",)
    # No part answered, or another refusal (weak evidence, a name never mentioned): the refusal stands.
    assert with_parts(untyped, [("a", refused), ("b", refused)]) is untyped
    weak = Verdict(False, "weak evidence (best cosine 0.31)")
    assert not with_parts(weak, [("a", answered), ("b", refused)]).sufficient
    # An answered question stays answered, naming the parts its own evidence does not answer.
    whole = with_parts(answered, [("a", answered), ("b", refused)])
    assert whole.sufficient and not whole.by_parts and whole.unsupported_parts == ("b",)
