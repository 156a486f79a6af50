"""Fixtures for the answer engine's tests.

- `agent_settings` / `agent_service` / `offline_engine` (module): one private copy of the synced sample
  store per test module, and one offline engine over it. Answering reads only, so the tests of a module
  share them; a test that changes the store uses `sample_service` (its own copy) instead.
- `fake_openai` (module) / `fake_llm` (per test, reset, checked): the fake OpenAI-compatible server of
  `tests/helpers/fake_openai.py` on 127.0.0.1.
- `llm_engine` / `make_llm_engine(**settings)`: an engine in LLM mode over `agent_service`, talking to
  `fake_llm`.
- `fixture_questions`: tests/fixtures/sample_questions.jsonl, by question text.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.fake_openai import API_KEY, FakeOpenAI
from helpers.settings import build_settings

from bot.config import REPO_ROOT, Settings

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "sample_questions.jsonl"


def agent_settings_for(data_dir: Path, **overrides: object) -> Settings:
    """Settings over `data_dir` with the repo's sample KBs declared; no key, no server, unless given."""
    return build_settings(data_dir, **overrides)


@pytest.fixture(scope="session")
def settings_for() -> Callable[..., Settings]:
    """`settings_for(data_dir, **overrides)`: `agent_settings_for` as a fixture, for any scope."""
    return agent_settings_for


@pytest.fixture(scope="module")
def agent_data_dir(synced_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("agent") / "data"
    shutil.copytree(synced_data_dir, data_dir)
    return data_dir


@pytest.fixture(scope="module")
def agent_settings(agent_data_dir: Path) -> Settings:
    return agent_settings_for(agent_data_dir)


@pytest.fixture(scope="module")
def agent_service(agent_settings: Settings) -> Iterator:
    from tools.service import KnowledgeService

    with KnowledgeService(agent_settings.tools) as service:
        yield service


@pytest.fixture(scope="module")
def offline_engine(agent_service):
    from bot.agent.engine import AnswerEngine

    engine = AnswerEngine(agent_service)
    assert engine.mode == "offline"
    return engine


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake_llm(fake_openai: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The module's fake server, with nothing scripted and nothing recorded. A scripted handler that
    raised during the test fails it (at teardown), whatever the engine made of the HTTP 400."""
    fake_openai.reset()
    try:
        yield fake_openai
        fake_openai.check()
    finally:
        fake_openai.reset()


@pytest.fixture
def make_llm_engine(agent_service, agent_data_dir: Path, fake_llm: FakeOpenAI) -> Callable:
    """`make_llm_engine(**setting_overrides)`: an LLM-mode engine over `agent_service`, on `fake_llm`."""
    from bot.agent.engine import AnswerEngine

    def make(**overrides: object):
        values = {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": fake_llm.base_url, "KBBOT_LLM_TIMEOUT": 5, **overrides}
        engine = AnswerEngine(agent_service, settings=agent_settings_for(agent_data_dir, **values))
        assert engine.mode == "llm"
        return engine

    return make


@pytest.fixture
def llm_engine(make_llm_engine: Callable):
    return make_llm_engine()


@pytest.fixture(scope="session")
def fixture_questions() -> dict[str, dict]:
    rows = [json.loads(line) for line in FIXTURES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["question"]: row for row in rows}


@pytest.fixture
def chunk_exists(agent_service) -> Callable:
    """`chunk_exists(citation)`: the cited chunk is in the store and belongs to a live version."""

    def check(citation) -> bool:
        found = agent_service.store.get_chunks(citation.kb, [citation.chunk_id])
        return len(found) == 1 and found[0].chunk_id == citation.chunk_id and found[0].document == citation.document

    return check
