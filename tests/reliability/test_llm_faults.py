"""A question's deadline holds whatever the LLM server does: hang, rate-limit, fail, talk garbage, crawl.

The real engine, `openai` client and tenacity over the synced sample store, against the fake
OpenAI-compatible server of tests/helpers/fake_openai.py. The per-request timeout is left at its
30 s default: only the deadline bounds the question. Each test checks that the answer comes back
within the deadline (plus MARGIN_S for the offline steps), is the offline engine's own answer where
every LLM step failed, and says in its notes what happened.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import figures
from helpers.fake_openai import API_KEY, FakeOpenAI, Reply, Request, chat, error
from helpers.settings import build_settings

from bot.agent.models import Turn

MARGIN_S = 1.0  # what the offline steps may add past the deadline on a busy 2-core machine

TOKEN_QUESTION = "What is the access token lifetime for the Lumen Dispatch API OAuth flow?"
HISTORY = [
    Turn("user", "How much paid parental leave do employees get?"),
    Turn("assistant", "Primary caregivers get 16 weeks of fully paid leave."),
]
FOLLOW_UP = "and for contractors?"
SKIPPED = "the LLM is skipped for the rest of this question"


@pytest.fixture(scope="module")
def faults_data_dir(synced_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("llm-faults") / "data"
    shutil.copytree(synced_data_dir, data_dir)
    return data_dir


@pytest.fixture(scope="module")
def faults_service(faults_data_dir: Path) -> Iterator:
    from tools.service import KnowledgeService

    with KnowledgeService(build_settings(faults_data_dir).tools) as service:
        yield service


@pytest.fixture(scope="module")
def offline_answers(faults_service) -> Callable:
    """`offline_answers(question, history)`: the offline engine's answer (the model is loaded once, here)."""
    from bot.agent.engine import AnswerEngine

    engine = AnswerEngine(faults_service)
    cache: dict = {}

    def answer(question: str, history: tuple[Turn, ...] = ()):
        if (question, history) not in cache:
            cache[question, history] = engine.answer(question, list(history))
        return cache[question, history]

    answer(TOKEN_QUESTION)
    answer(FOLLOW_UP, tuple(HISTORY))
    return answer


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake(fake_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The fake server, reset; a scripted handler that raised fails the test."""
    fake_server.reset()
    try:
        yield fake_server
        fake_server.check()
    finally:
        fake_server.reset()


@pytest.fixture
def llm_engine(faults_service, faults_data_dir: Path, fake: FakeOpenAI, offline_answers):
    """An LLM-mode engine on the fake, with the default 30 s per-request timeout."""
    from bot.agent.engine import AnswerEngine

    settings = build_settings(faults_data_dir, OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=fake.base_url)
    assert settings.llm_timeout_s == 30
    engine = AnswerEngine(faults_service, settings=settings)
    assert engine.mode == "llm"
    return engine


def timed_answer(engine, question: str, deadline: float, history=()) -> tuple[object, float]:
    started = time.monotonic()
    answer = engine.answer(question, list(history), deadline=deadline)
    return answer, time.monotonic() - started


def assert_is_the_offline_answer(answer, offline) -> None:
    assert answer.status == offline.status == "answered" and answer.mode == "offline"
    assert answer.answer == offline.answer and answer.standalone_query == offline.standalone_query
    assert [c.chunk_id for c in answer.citations] == [c.chunk_id for c in offline.citations]


# --- the faults -----------------------------------------------------------------------------------


def test_a_hung_server_costs_the_question_no_more_than_its_deadline(llm_engine, fake, offline_answers):
    release = threading.Event()

    def hang(request: Request) -> Reply:
        release.wait(60)
        return chat({"standalone_query": "too late"})

    fake.handler = hang
    try:
        answer, elapsed = timed_answer(llm_engine, FOLLOW_UP, deadline=3.0, history=HISTORY)
    finally:
        release.set()

    assert elapsed < 3.0 + MARGIN_S, f"{elapsed:.1f} s for a 3 s deadline"
    assert_is_the_offline_answer(answer, offline_answers(FOLLOW_UP, tuple(HISTORY)))
    # One request, cut at the deadline (less the offline reserve) instead of 30 s, and never retried.
    assert fake.kinds == ["CondensedQuery"]
    [note] = answer.notes
    assert note.startswith(
        "LLM unavailable for condense (APITimeoutError, no time left to retry before the question's deadline)"
    )
    assert "offline condense used" in note and SKIPPED in note
    figures.add("faults_survived")


def test_429_retry_after_is_honoured_while_the_deadline_allows(llm_engine, fake, offline_answers):
    fake.handler = lambda request: error(429, "slow down", headers={"Retry-After": "1"})
    # Attempts at about 0 s, 1 s and 2 s; a fourth, after another 1 s wait, would need 2 s left (the
    # wait, the offline reserve and a minimal request): that holds after the second, not the third.
    answer, elapsed = timed_answer(llm_engine, TOKEN_QUESTION, deadline=3.95)

    assert elapsed < 3.95 + MARGIN_S, f"{elapsed:.1f} s for a 3.95 s deadline"
    assert_is_the_offline_answer(answer, offline_answers(TOKEN_QUESTION))
    # Retried after the second the server asked for, until one more wait and request would not fit.
    requests = fake.requests
    assert [r.kind for r in requests] == ["RouteChoice"] * 3
    assert all(later.at - earlier.at >= 0.9 for earlier, later in zip(requests, requests[1:], strict=False))
    [note] = answer.notes
    assert note.startswith("LLM unavailable for routing (RateLimitError (HTTP 429), no time left to retry")
    assert "offline routing used" in note and SKIPPED in note
    figures.add("faults_survived")


def test_persistent_500s_stop_being_retried_before_the_deadline(llm_engine, fake, offline_answers):
    fake.handler = lambda request: error(500, "down")  # no Retry-After: exponential backoff, 0.5 s, 1 s, 2 s
    answer, elapsed = timed_answer(llm_engine, FOLLOW_UP, deadline=4.0, history=HISTORY)

    assert elapsed < 4.0 + MARGIN_S, f"{elapsed:.1f} s for a 4 s deadline"
    assert_is_the_offline_answer(answer, offline_answers(FOLLOW_UP, tuple(HISTORY)))
    assert fake.kinds == ["CondensedQuery"] * 3, "the fourth attempt's 2 s wait does not fit in the deadline"
    [note] = answer.notes
    assert note.startswith("LLM unavailable for condense (InternalServerError (HTTP 500), no time left to retry")
    assert SKIPPED in note
    figures.add("faults_survived")


GARBAGE = {
    "RouteChoice": chat("Sure! Here is the JSON you asked for: kbs=product"),
    "GradeVerdict": chat('{"relevant_ids": ["E1"], "sufficient": tru'),
    "answer": chat("Tokens last an hour, trust me."),  # no citation
}


def test_garbage_in_every_step_still_answers_within_the_deadline(llm_engine, fake, offline_answers):
    fake.handler = lambda request: GARBAGE[request.kind]
    answer, elapsed = timed_answer(llm_engine, TOKEN_QUESTION, deadline=3.0)

    assert elapsed < 3.0 + MARGIN_S, f"{elapsed:.1f} s for a 3 s deadline"
    assert_is_the_offline_answer(answer, offline_answers(TOKEN_QUESTION))
    assert "trust me" not in answer.answer
    # Garbage is the step's problem, not the server's: each step asks once, none is retried.
    assert fake.kinds == ["RouteChoice", "GradeVerdict", "answer"]
    assert answer.notes == [
        "LLM unavailable for routing (malformed RouteChoice output (JSONDecodeError)): offline routing used",
        "LLM unavailable for grading (malformed GradeVerdict output (JSONDecodeError)): offline check used",
        "the LLM's answer had no valid citation: extractive answer used",
    ]
    figures.add("faults_survived")


def test_a_slow_server_gets_the_steps_there_is_time_for(llm_engine, fake):
    """A valid reply that comes 0.8 s before the deadline: routing gets its answer; with under a second
    left, grading and the answer are not even asked — offline, noted once."""
    started = time.monotonic()

    def late(request: Request) -> Reply:
        time.sleep(max(started + 3.0 - 0.8 - time.monotonic(), 0.0))
        return chat({"kbs": ["product"], "reason": "late but right"})

    fake.handler = late
    answer, elapsed = timed_answer(llm_engine, TOKEN_QUESTION, deadline=3.0)

    assert elapsed < 3.0 + MARGIN_S, f"{elapsed:.1f} s for a 3 s deadline"
    assert fake.kinds == ["RouteChoice"]
    assert answer.route.kbs == ["product"] and answer.route.method == "llm" and answer.mode == "llm"
    assert [r.policy for r in answer.rounds] == ["offline"]
    assert answer.status == "answered" and "3600 seconds" in answer.answer
    assert "api-reference.pdf" in [c.document for c in answer.citations]
    [note] = answer.notes
    assert note.startswith("LLM skipped for grading (") and "s left before the question's deadline" in note
    assert "offline check used" in note and SKIPPED in note
    figures.add("faults_survived")


# --- the deadline itself --------------------------------------------------------------------------


def test_no_time_at_all_is_an_offline_answer(llm_engine, fake, offline_answers):
    answer, elapsed = timed_answer(llm_engine, TOKEN_QUESTION, deadline=0)
    assert not fake.requests
    assert_is_the_offline_answer(answer, offline_answers(TOKEN_QUESTION))
    assert answer.notes == [
        "LLM skipped for routing (0.0 s left before the question's deadline): offline routing used; " + SKIPPED
    ]
    assert elapsed < MARGIN_S


def test_a_deadline_is_a_number_of_seconds():
    from bot.agent.llm import Deadline

    assert Deadline.after(None).at is None and Deadline.after(float("inf")).at is None
    assert Deadline.after(None).allows_request()
    assert not Deadline.after(-5).allows_request() and Deadline.after(-5).left() == 0.0
    assert Deadline.after(10).allows_request(after_wait=8) and not Deadline.after(10).allows_request(after_wait=9.2)
    with pytest.raises(ValueError, match="number of seconds"):
        Deadline.after(float("nan"))
