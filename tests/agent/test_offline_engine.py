"""The answer engine end to end, offline (no key), on the repo's sample knowledge bases.

Real parts throughout: the synced sample store (Chroma + BM25), the local embedding model, the
llama-index workflow. Questions and expectations come from tests/fixtures/sample_questions.jsonl.
"""

from __future__ import annotations

import re
import threading

import pytest

from bot.agent import messages
from bot.agent.engine import MAX_QUESTION_CHARS, MAX_ROUNDS, AnswerEngine
from bot.agent.models import Answer, EmptyQuestion, Turn
from tools.store import KnowledgeBaseError
from tools.text import identifiers, mentions

ALL_KBS = ["engineering", "finance", "people", "product"]

# In-KB questions (EN + ZH) whose answers are robust: the right document wins by a wide margin.
IN_KB = [
    "How many vacation days do full-time staff get per year?",
    "How much fully paid time off does the primary caregiver get when a baby arrives?",
    "What share of traffic does the production canary get, and for how long?",
    "How long is an OAuth access token valid for the API?",
    "Can the driver app keep working with no signal? For how long?",
    "去北京出差，酒店每晚最多可以报销多少钱？",
    "上海办公室的员工一年总共有几天带薪年假？",
]

OUT_OF_KB = [
    "What is the dental coverage limit for employees in Brazil?",
    "How much does the Lumen Dispatch Platinum plan cost?",
    "Who won the 1998 FIFA World Cup?",
    "How do I make sourdough bread at home?",
]

PARENTAL_HISTORY = [
    Turn("user", "How much paid parental leave do employees get?"),
    Turn(
        "assistant",
        "Primary caregivers get 16 weeks of fully paid leave (plus up to 8 weeks at 50% pay); "
        "secondary caregivers get 6 weeks fully paid.",
    ),
]


def documents(answer: Answer) -> list[str]:
    return [c.document for c in answer.citations]


def assert_well_formed(answer: Answer, chunk_exists) -> None:
    """What every Answer promises, whatever its status."""
    assert 1 <= len(answer.rounds) <= MAX_ROUNDS
    for r in answer.rounds:
        assert r.query.strip() and r.kbs and r.reason.strip()
        assert isinstance(r.sufficient, bool)
    assert "total" in answer.timings_ms
    if answer.status == "answered":
        assert answer.citations, "an answer with no citation is not an answer"
        assert answer.rounds[-1].sufficient
        assert [c.n for c in answer.citations] == list(range(1, len(answer.citations) + 1))
        markers = {int(n) for n in re.findall(r"\[(\d+)\]", answer.answer)}
        assert markers == {c.n for c in answer.citations}, "every [n] has a citation and every citation is used"
        for c in answer.citations:
            assert chunk_exists(c), f"citation {c.n} points to no live chunk: {c.chunk_id}"
    else:
        assert answer.status == "insufficient_context"
        assert not answer.citations
        assert not any(r.sufficient for r in answer.rounds)


# --- in-KB, out-of-KB ---------------------------------------------------------------------------


@pytest.mark.parametrize("question", IN_KB)
def test_in_kb_question_is_answered_citing_the_right_document(
    offline_engine, fixture_questions, chunk_exists, question
):
    expected = fixture_questions[question]
    answer = offline_engine.answer(question)

    assert answer.status == "answered", answer.answer
    assert expected["document"] in documents(answer)
    for fragment in expected["answer_contains"]:
        assert fragment in answer.answer
    assert expected["kb"] in answer.route.kbs
    assert answer.mode == "offline" and answer.language == expected["lang"]
    assert answer.standalone_query == question
    assert_well_formed(answer, chunk_exists)


@pytest.mark.parametrize("question", OUT_OF_KB)
def test_out_of_kb_question_gets_insufficient_context_naming_what_was_searched(offline_engine, chunk_exists, question):
    answer = offline_engine.answer(question)

    assert answer.status == "insufficient_context", answer.answer
    assert answer.citations == []
    assert answer.searched_kbs, "a refusal names what it searched"
    for kb in answer.searched_kbs:
        assert kb in answer.answer
    assert set(answer.searched_kbs) <= set(ALL_KBS)
    assert "couldn't find enough" in answer.answer
    assert_well_formed(answer, chunk_exists)


def test_refusal_in_chinese_for_a_chinese_question(offline_engine):
    # Pinned to the English-only product KB, the Chinese annual-leave question has nothing to go on.
    answer = offline_engine.answer("上海办公室的员工一年总共有几天带薪年假？", kb="product")
    assert answer.status == "insufficient_context"
    assert answer.language == "zh"
    assert "没有找到足够的信息" in answer.answer and "product" in answer.answer


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("How does the company match 401k contributions?", ["401k"]),
        ("A customer gets unroutable_address from the API", ["unroutable_address"]),
        ("Is SEV1 paged at night, unlike SEV3?", ["SEV1", "SEV3"]),
        ("What changed in v4.12.0?", ["v4.12.0"]),
        ("What happened in the 1990s, on the 3rd try?", []),
        ("How many vacation days do full-time staff get?", []),
    ],
)
def test_identifiers_in_a_question(question, expected):
    assert identifiers(question) == expected


@pytest.mark.parametrize(
    ("text", "identifier", "named"),
    [
        ("Lumen matches your 401(k) contributions", "401k", True),
        ("the 401 kilograms limit", "401k", False),
        ("returns `unroutable_address` when", "unroutable_address", True),
        ("an unroutable_address_v2 code", "unroutable_address", False),
        ("a SEV-1 incident", "SEV1", True),
        ("a SEV10 incident", "SEV1", False),
    ],
)
def test_an_identifier_is_named_whatever_the_punctuation_inside(text, identifier, named):
    assert mentions(text, identifier) is named


@pytest.mark.parametrize(
    "question",
    [
        "How does the company match 401k contributions?",  # the document writes 401(k)
        "A customer is getting unroutable_address back from the API - what does that mean?",
    ],
)
def test_a_question_naming_an_identifier_is_answered_from_the_document_that_names_it(
    offline_engine, fixture_questions, chunk_exists, question
):
    """MiniLM reads an error code or a plan name as noise (best cosine < 0.40): the passage that names
    it as written is the evidence, and its KB is where it is documented."""
    expected = fixture_questions[question]
    answer = offline_engine.answer(question)
    assert_well_formed(answer, chunk_exists)
    assert answer.status == "answered", [r.reason for r in answer.rounds]
    assert answer.route.kbs[0] == expected["kb"]
    assert expected["document"] in documents(answer)
    assert any(fact in answer.answer for fact in expected["answer_contains"]), answer.answer


def test_the_answer_quotes_the_sentence_that_names_the_identifier(offline_engine, chunk_exists):
    """Mid-thread on another subject, the error-code question picks up the thread's keywords and its
    evidence comes from every KB; the quoted sentence must still be the one naming the code."""
    history = [
        Turn("user", "How does the company match 401k contributions?"),
        Turn("assistant", "Lumen matches 100% of the first 4% of salary you contribute. [1]"),
        Turn("user", "and for contractors?"),
        Turn("assistant", "Contractors are not eligible for Lumen benefits. [1]"),
    ]
    answer = offline_engine.answer(
        "A customer is getting unroutable_address back from the API - what does that mean?", history
    )
    assert_well_formed(answer, chunk_exists)
    assert answer.status == "answered", [r.reason for r in answer.rounds]
    assert "unroutable_address" in answer.answer and "could not be geocoded" in answer.answer
    assert documents(answer) == ["api-reference.pdf"]


# --- conversation -------------------------------------------------------------------------------


def test_follow_up_is_resolved_from_history_and_routed(offline_engine, chunk_exists):
    answer = offline_engine.answer("and for contractors?", history=PARENTAL_HISTORY)

    assert "parental leave" in answer.standalone_query.lower()
    assert "contractor" in answer.standalone_query.lower()
    assert answer.route.kbs == ["people"]
    assert answer.status == "answered", answer.answer
    assert "parental-leave.html" in documents(answer)
    assert_well_formed(answer, chunk_exists)


def test_self_contained_question_is_left_alone_despite_history(offline_engine):
    question = "How long is probation for new hires?"
    answer = offline_engine.answer(question, history=PARENTAL_HISTORY)
    assert answer.standalone_query == question
    assert answer.status == "answered" and "onboarding-guide.md" in documents(answer)


@pytest.mark.parametrize(
    ("question", "follow_up"),
    [
        ("Is there a limit on how many weeks can be taken?", False),  # existential "there" refers to nothing
        ("There's a freeze in December, right?", False),
        ("And is it paid?", True),
        ("What is the office like there?", True),  # "there" = a place said before
    ],
)
def test_existential_there_is_not_a_reference(question, follow_up):
    from bot.agent import condense

    assert condense.is_follow_up(question) is follow_up


def test_an_ambiguous_question_follows_the_threads_subject(offline_engine, chunk_exists):
    # Finance has approval thresholds, engineering deploy-freeze exceptions: alone, both are searched.
    question = "What is the approval process for exceptions?"
    alone = offline_engine.answer(question)
    in_thread = offline_engine.answer(question, history=[Turn("user", "How do we deploy to production?")])

    assert {"finance", "engineering"} <= set(alone.route.kbs)
    assert in_thread.standalone_query == question  # self-contained: the thread only places it
    assert in_thread.route.kbs == ["engineering"]
    assert in_thread.route.scores["engineering"] > alone.route.scores["engineering"]
    assert in_thread.status == "answered" and "deploy-process.docx" in documents(in_thread)
    assert_well_formed(in_thread, chunk_exists)

    # The bot's own earlier answer places the thread too; its refusals do not.
    earlier = offline_engine.answer("How do we deploy to production?")
    after_answer = [Turn("user", "Quick question for you"), Turn("assistant", earlier.answer)]
    assert offline_engine.answer(question, history=after_answer).route.kbs == ["engineering"]
    refusal = offline_engine.answer("What is the weather on Mars?")
    assert refusal.status == "insufficient_context" and messages.is_fixed_reply(refusal.answer)
    after_refusal = [Turn("assistant", refusal.answer)]
    assert offline_engine.answer(question, history=after_refusal).route.scores == alone.route.scores


def test_chinese_follow_up_over_the_chinese_kb(offline_engine, chunk_exists):
    history = [
        Turn("user", "上海办公室报销要在哪里提交？"),
        Turn("assistant", "通过 Lumen 报销平台提交，也可以在企业微信工作台的“报销”应用里提交。"),
    ]
    answer = offline_engine.answer("它多久到账?", history=history)

    assert "报销" in answer.standalone_query and "到账" in answer.standalone_query
    assert answer.language == "zh"
    assert answer.status == "answered", answer.answer
    assert "shanghai-expense-policy-zh.md" in documents(answer)
    assert_well_formed(answer, chunk_exists)


def test_chinese_question_answered_from_the_chinese_documents(offline_engine, chunk_exists):
    answer = offline_engine.answer("门禁卡丢了，补办一张要交多少钱？")
    assert answer.status == "answered" and answer.language == "zh"
    assert "shanghai-office-guide-zh.docx" in documents(answer)
    assert "¥50" in answer.answer
    assert all(c.kb == "people" for c in answer.citations)
    assert_well_formed(answer, chunk_exists)


# --- the loop -----------------------------------------------------------------------------------


@pytest.mark.parametrize("question", [OUT_OF_KB[0], OUT_OF_KB[2], IN_KB[0]])
def test_round_cap_and_round_records(offline_engine, question):
    answer = offline_engine.answer(question)
    assert 1 <= len(answer.rounds) <= MAX_ROUNDS
    seen = set()
    for r in answer.rounds:
        assert r.query.strip() and r.reason.strip() and r.policy == "offline"
        assert r.kbs and set(r.kbs) <= set(ALL_KBS)
        assert (r.query, tuple(sorted(r.kbs))) not in seen, "a round is never repeated"
        seen.add((r.query, tuple(sorted(r.kbs))))
        assert len(r.top_scores) <= 3 and set(r.top_scores) <= set(r.evidence_ids)
    if answer.status == "insufficient_context":
        assert len(answer.rounds) == MAX_ROUNDS, "an unanswerable question uses every round before refusing"


def test_never_more_than_three_rounds_even_if_nothing_is_ever_sufficient(agent_service, monkeypatch):
    from bot.agent import grading
    from bot.agent.fallback import offline

    engine = AnswerEngine(agent_service)
    graded = []

    def never_enough(query, evidence, kbs, llm, asked=None):
        graded.append(list(kbs))
        return offline(grading.Verdict(False, "test: never sufficient", missing=query))

    monkeypatch.setattr(engine, "grade", never_enough)
    answer = engine.answer("How many vacation days do full-time staff get per year?")

    assert answer.status == "insufficient_context"
    assert len(answer.rounds) == MAX_ROUNDS == len(graded)
    assert [r.reason for r in answer.rounds] == ["test: never sufficient"] * MAX_ROUNDS
    assert "test: never sufficient" in answer.answer


@pytest.mark.parametrize("snapshot", [True, False], ids=["in-memory", "chroma"])
def test_later_rounds_are_judged_by_the_standalone_question(agent_service, monkeypatch, snapshot):
    """A rephrased search may find new evidence, but its cosine is measured against the question it must
    answer: keywords alone can look closer to a chunk than the question does."""
    import numpy as np

    from bot.agent import grading
    from bot.agent.fallback import offline
    from tools import search

    if not snapshot:
        monkeypatch.setattr(search, "SNAPSHOT_MAX_CHUNKS", 0)  # the path very large KBs take
    engine = AnswerEngine(agent_service)
    seen = []

    def record(query, evidence, kbs, llm, asked=None):
        seen.append([(e.chunk, e.cosine) for e in evidence])
        return offline(grading.Verdict(False, "test: never sufficient", missing=query))

    monkeypatch.setattr(engine, "grade", record)
    question = "Could you possibly tell me how many vacation days full-time staff get per year?"
    answer = engine.answer(question)
    assert len(answer.rounds) == MAX_ROUNDS and answer.rounds[1].query != question

    standalone = agent_service.embedder.embed_query(question)
    for rephrased, evidence in zip(answer.rounds[1:], seen[1:], strict=True):
        rephrased_vector = agent_service.embedder.embed_query(rephrased.query)
        for chunk, cosine in evidence:
            [(_, vector)] = agent_service.store.get_chunks_with_vectors(chunk.kb, [chunk.chunk_id])
            assert cosine == pytest.approx(float(np.dot(vector, standalone)), abs=1e-4)
            assert abs(cosine - float(np.dot(vector, rephrased_vector))) > 1e-3


def test_keyword_reformulation_rescues_a_chatty_question(offline_engine):
    """A question drowned in filler fails round 1; the keyword-only retry on the routed KB answers it."""
    question = "How many vacation days do full-time staff get per year? " + "please tell me more about it " * 8
    answer = offline_engine.answer(question)
    assert answer.status == "answered", [(r.query, r.kbs, r.reason) for r in answer.rounds]
    assert "annual-and-sick-leave.md" in documents(answer)


# --- citations are real -------------------------------------------------------------------------


def test_every_citation_is_a_live_chunk_of_the_store(offline_engine, agent_service):
    for question in IN_KB[:4]:
        answer = offline_engine.answer(question)
        for c in answer.citations:
            [chunk] = agent_service.store.get_chunks(c.kb, [c.chunk_id])
            assert (chunk.document, chunk.location) == (c.document, c.location)
            assert agent_service.store.live_versions(c.kb)[c.document] == chunk.version
            assert c.excerpt and c.score > 0


def test_citations_follow_the_live_version_of_a_document(sample_service):
    """Re-ingesting a document flips citations to the new version; deleting it removes it from answers."""
    engine = AnswerEngine(sample_service)
    question = "Where is the annual team offsite held?"

    sample_service.ingest_bytes(
        "people",
        "team-offsite.md",
        b"# Team offsite\n\nThe annual team offsite is held in Lisbon, Portugal, every May.\n",
    )
    first = engine.answer(question)
    assert first.status == "answered" and "Lisbon" in first.answer
    [old] = [c for c in first.citations if c.document == "team-offsite.md"]

    sample_service.ingest_bytes(
        "people",
        "team-offsite.md",
        b"# Team offsite\n\nThe annual team offsite is held in Porto, Portugal, every June.\n",
    )
    second = engine.answer(question)
    assert second.status == "answered" and "Porto" in second.answer and "Lisbon" not in second.answer
    [new] = [c for c in second.citations if c.document == "team-offsite.md"]
    assert new.chunk_id != old.chunk_id
    assert sample_service.store.get_chunks("people", [old.chunk_id]) == []
    assert len(sample_service.store.get_chunks("people", [new.chunk_id])) == 1

    sample_service.delete_document("people", "team-offsite.md")
    third = engine.answer(question)
    assert "team-offsite.md" not in documents(third)
    assert "Porto" not in third.answer


def test_pinned_kb_narrows_the_search(offline_engine):
    answer = offline_engine.answer("How many vacation days do full-time staff get per year?", kb="product")
    assert answer.route.kbs == ["product"] and answer.route.method == "pinned"
    assert set(answer.searched_kbs) == {"product"}
    assert all(c.kb == "product" for c in answer.citations)


def test_unknown_pinned_kb_is_a_clear_error(offline_engine):
    with pytest.raises(KnowledgeBaseError, match="nosuchkb"):
        offline_engine.answer("How long is probation?", kb="nosuchkb")


# --- bad and odd input --------------------------------------------------------------------------


@pytest.mark.parametrize("question", ["", "   ", "\n\t ", " ?! … ", None])
def test_empty_question_raises_empty_question(offline_engine, question):
    with pytest.raises(EmptyQuestion):
        offline_engine.answer(question)  # type: ignore[arg-type]


def test_huge_question_is_truncated_with_a_note(offline_engine):
    question = "How many vacation days do full-time staff get per year? " + "blah " * 3000
    answer = offline_engine.answer(question)
    assert len(answer.question) <= MAX_QUESTION_CHARS
    assert any("truncated" in note for note in answer.notes)
    assert answer.question.startswith("How many vacation days")
    assert 1 <= len(answer.rounds) <= MAX_ROUNDS


def test_huge_question_without_spaces_is_truncated_too(offline_engine):
    answer = offline_engine.answer("年假" * 5000)
    assert len(answer.question) <= MAX_QUESTION_CHARS
    assert any("truncated" in note for note in answer.notes)


# --- surfaces' needs ----------------------------------------------------------------------------


def test_status_updates_reach_the_callback_and_a_failing_callback_changes_nothing(offline_engine):
    seen: list[str] = []
    answer = offline_engine.answer("How long is probation for new hires?", on_status=seen.append)
    assert answer.status == "answered"
    assert any(s.startswith("Searching") for s in seen)
    # Offline the answer is picked at once: no "Writing the answer…" for the reply to clear unread (with an LLM
    # it is said: test_llm_engine.py's happy path).
    assert "Writing the answer…" not in seen

    def broken(_: str) -> None:
        raise RuntimeError("the Slack update failed")

    again = offline_engine.answer("How long is probation for new hires?", on_status=broken)
    assert again.status == "answered" and again.answer == answer.answer


def test_answer_json_has_the_contract_fields(offline_engine):
    import json

    data = json.loads(json.dumps(offline_engine.answer(IN_KB[0]).to_json()))
    assert {"status", "answer", "standalone_query", "route", "rounds", "citations", "timings_ms"} <= set(data)
    assert set(data["route"]) >= {"kbs", "scores"}
    assert {"query", "kbs", "sufficient"} <= set(data["rounds"][0])
    assert {"n", "kb", "document", "chunk_id", "excerpt", "score", "location"} <= set(data["citations"][0])


def test_one_engine_answers_concurrent_questions(offline_engine):
    """The Slack bot answers from worker threads with one shared engine."""
    questions = {
        IN_KB[0]: "annual-and-sick-leave.md",
        IN_KB[6]: "shanghai-office-guide-zh.docx",
        IN_KB[3]: "api-reference.pdf",
        OUT_OF_KB[2]: None,
    }
    results: dict[str, Answer | BaseException] = {}

    def ask(q: str) -> None:
        try:
            results[q] = offline_engine.answer(q)
        except BaseException as exc:  # reported below
            results[q] = exc

    threads = [threading.Thread(target=ask, args=(q,)) for q in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for q, document in questions.items():
        answer = results[q]
        assert isinstance(answer, Answer), answer
        if document is None:
            assert answer.status == "insufficient_context"
        else:
            assert answer.status == "answered" and document in documents(answer)


# --- empty stores -------------------------------------------------------------------------------


def test_nothing_ingested_yet_is_a_plain_refusal(service):
    """A fresh data dir (KBs declared, nothing synced): no KB to search, said plainly, no crash."""
    answer = AnswerEngine(service).answer("How long is probation for new hires?")
    assert answer.status == "insufficient_context"
    assert answer.searched_kbs == [] and answer.citations == [] and answer.rounds == []
    assert "no knowledge base" in answer.answer.lower()


def test_pinned_empty_kb_is_searched_and_named_in_the_refusal(sample_service):
    sample_service.create_kb("scratch", "A knowledge base with no documents yet.")
    answer = AnswerEngine(sample_service).answer("How long is probation for new hires?", kb="scratch")
    assert answer.status == "insufficient_context"
    assert answer.searched_kbs == ["scratch"] and "scratch" in answer.answer
    assert 1 <= len(answer.rounds) <= MAX_ROUNDS and all(r.evidence_ids == [] for r in answer.rounds)
