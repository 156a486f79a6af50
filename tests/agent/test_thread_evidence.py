"""The thread's evidence as a prior: a follow-up is first looked for in the documents the previous answer cited
(bot.agent.probing.with_thread_documents), on the sample KBs with the bot's real answers as the history."""

from __future__ import annotations

import pytest

from bot.agent.models import Turn, document_key


def asked_with_citations(engine, *questions: str, cite: bool = True):
    """Each question asked in turn in one thread; the history's answers carry the documents they cited."""
    history: list[Turn] = []
    for question in questions[:-1]:
        reply = engine.answer(question, history)
        history += [Turn("user", question), Turn("assistant", reply.answer, reply.cited_documents if cite else ())]
    return history, engine.answer(questions[-1], history)


def test_a_follow_up_is_answered_from_the_document_the_thread_was_answered_from(offline_engine) -> None:
    # Without the thread's evidence, "what if I don't spend it all?" led with the home-office equipment table
    # (another document's spending limits).
    questions = ("what's the learning budget per year?", "what if I don't spend it all?")
    history, answer = asked_with_citations(offline_engine, *questions)
    assert history[-1].cited and history[-1].cited[0] == document_key("people", "benefits-overview.pdf")
    assert answer.status == "answered"
    assert answer.citations[0].document == "benefits-overview.pdf", answer.answer
    assert "roll over" in answer.answer, answer.answer
    _, unaided = asked_with_citations(offline_engine, *questions, cite=False)
    assert unaided.citations[0].document != "benefits-overview.pdf"  # the prior is what found it


def test_a_refused_answer_gives_no_prior_and_an_out_of_kb_follow_up_is_still_refused(offline_engine) -> None:
    history, answer = asked_with_citations(
        offline_engine, "what's the learning budget per year?", "and what is the learning budget of the Lisbon office?"
    )
    assert history[-1].cited
    assert answer.status == "insufficient_context", answer.answer


def test_a_history_turn_reads_its_cited_documents_and_rejects_bad_ones() -> None:
    turn = Turn.from_json({"role": "assistant", "text": "25 days. [1]", "cited": ["0123456789abcdef"]})
    assert turn.cited == ("0123456789abcdef",)
    assert Turn.from_json({"role": "user", "text": "hi"}).cited == ()
    with pytest.raises(ValueError, match="cited"):
        Turn.from_json({"role": "assistant", "text": "x", "cited": "people/leave.md"})
