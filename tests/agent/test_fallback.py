"""The one "LLM step with offline fallback" every step uses (bot.agent.fallback), on its own.

A real LlmClient against the fake OpenAI server; the step is a toy: the LLM names a colour, the
offline policy says "grey".
"""

from __future__ import annotations

import pytest
from helpers.fake_openai import API_KEY, chat, error
from helpers.settings import build_settings
from pydantic import BaseModel

from bot.agent.fallback import SKIPPED_FOR_THE_REST, LlmAccess, Step, llm_step
from bot.agent.llm import Deadline, LlmClient

COLOUR = Step("colour", "offline colour", "LLM colour unusable: offline colour used")


class Colour(BaseModel):
    colour: str


@pytest.fixture
def client(fake_llm, tmp_path) -> LlmClient:
    return LlmClient(build_settings(tmp_path / "data", OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=fake_llm.base_url))


def colour_step(access: LlmAccess, **kwargs):
    return llm_step(
        COLOUR,
        access,
        lambda: [{"role": "user", "content": "a colour?"}],
        Colour,
        lambda reply: reply.colour if reply.colour != "invisible" else None,
        lambda: "grey",
        **kwargs,
    )


def test_a_valid_reply_is_the_llms(client, fake_llm):
    fake_llm.handler = lambda request: chat({"colour": "teal"})
    outcome = colour_step(LlmAccess(client))
    assert (outcome.value, outcome.policy, outcome.note, outcome.llm_down) == ("teal", "llm", None, False)


@pytest.mark.parametrize("access", ["no client", "down", "not wanted"])
def test_no_llm_to_ask_is_offline_without_a_note(client, fake_llm, access):
    fake_llm.handler = lambda request: chat({"colour": "teal"})
    outcome = colour_step(
        LlmAccess(None if access == "no client" else client, down=access == "down"), wanted=access != "not wanted"
    )
    assert (outcome.value, outcome.policy, outcome.note, outcome.llm_down) == ("grey", "offline", None, False)
    assert not fake_llm.requests


def test_a_rejected_reply_gets_the_steps_note(client, fake_llm):
    fake_llm.handler = lambda request: chat({"colour": "invisible"})
    outcome = colour_step(LlmAccess(client))
    assert (outcome.value, outcome.policy, outcome.note, outcome.llm_down) == (
        "grey",
        "offline",
        "LLM colour unusable: offline colour used",
        False,
    )


def test_garbage_is_noted_and_leaves_the_llm_on(client, fake_llm):
    fake_llm.handler = lambda request: chat("colour: teal")
    outcome = colour_step(LlmAccess(client))
    assert outcome.value == "grey" and not outcome.llm_down
    assert outcome.note == "LLM unavailable for colour (malformed Colour output (JSONDecodeError)): offline colour used"


def test_a_server_failure_switches_the_llm_off_for_the_question(client, fake_llm):
    fake_llm.handler = lambda request: error(503, headers={"Retry-After": "0"})
    outcome = colour_step(LlmAccess(client))
    assert outcome.value == "grey" and outcome.llm_down
    assert outcome.note == (
        "LLM unavailable for colour (InternalServerError (HTTP 503)): offline colour used" + SKIPPED_FOR_THE_REST
    )


def test_too_little_time_skips_the_llm_for_the_question(client, fake_llm):
    outcome = colour_step(LlmAccess(client, deadline=Deadline.after(0.4)))
    assert outcome.value == "grey" and outcome.llm_down and not fake_llm.requests
    assert outcome.note.startswith("LLM skipped for colour (0.")
    assert outcome.note.endswith("s left before the question's deadline): offline colour used" + SKIPPED_FOR_THE_REST)
