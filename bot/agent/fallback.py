"""One LLM step with its offline fallback, the same for condense, route, grade, reformulate and answer.

Ask the LLM, validate what it says, else run the step's offline policy — and say so in a note. A
transport or status failure (down, hung, rate-limited past the retries, key refused) and a question
whose deadline is near switch the LLM off for the rest of the question: the remaining steps go
offline at once instead of each waiting out the same failure. Garbage output affects its step only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel

from bot.agent.llm import NO_DEADLINE, Deadline, LlmClient, LlmUnavailable

Reply = TypeVar("Reply", bound=BaseModel)
Value = TypeVar("Value")

SKIPPED_FOR_THE_REST = "; the LLM is skipped for the rest of this question"


@dataclass(frozen=True)
class Step:
    """How a step is named in the notes."""

    name: str  # "condense", "routing", ... as in "LLM unavailable for routing (...)"
    fallback: str  # what replaces the LLM: "offline routing", as in "...: offline routing used"
    rejected: str | None = None  # the note when the LLM's output fails validation (None: fall back silently)


CONDENSE = Step("condense", "offline condense", "LLM condense output unusable: offline condense used")
ROUTE = Step("routing", "offline routing", "LLM routing named no searchable knowledge base: offline routing used")
GRADE = Step("grading", "offline check")
REFORMULATE = Step("reformulation", "offline reformulation")
ANSWER = Step("the answer", "extractive answer", "the LLM's answer had no valid citation: extractive answer used")


@dataclass(frozen=True)
class LlmAccess:
    """The LLM as the question's steps may use it: none, switched off for this question, or until a deadline."""

    client: LlmClient | None
    down: bool = False
    deadline: Deadline = NO_DEADLINE

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.down


@dataclass(frozen=True)
class Outcome(Generic[Value]):
    """What a step decided, which policy decided it, and what the trace should say about it."""

    value: Value
    policy: Literal["llm", "offline"]
    note: str | None = None
    llm_down: bool = False  # the rest of this question must not use the LLM


def offline(value: Value) -> Outcome[Value]:
    return Outcome(value, "offline")


def llm_step(
    step: Step,
    access: LlmAccess,
    prompt: Callable[[], list[dict]],
    schema: type[Reply] | None,
    validate: Callable[[Reply], Value | None] | Callable[[str], Value | None],
    fallback: Callable[[], Value],
    *,
    wanted: bool = True,
) -> Outcome[Value]:
    """Send `prompt()` to the LLM (a JSON reply of `schema`, or text when None) within the deadline and
    `validate` the reply (None: unusable); else `fallback()`, the step's offline policy.

    `wanted=False` is the step's own reason not to ask (nothing to judge, a fact no model can change):
    offline, without a note."""
    if not wanted or access.client is None or access.down:
        return Outcome(fallback(), "offline")
    if not access.deadline.allows_request():
        left = access.deadline.left()
        note = f"LLM skipped for {step.name} ({left:.1f} s left before the question's deadline): {step.fallback} used"
        return Outcome(fallback(), "offline", note + SKIPPED_FOR_THE_REST, llm_down=True)
    client, deadline = access.client, access.deadline
    try:
        if schema is None:
            raw: object = client.complete(prompt(), deadline=deadline)
        else:
            raw = client.structured(prompt(), schema, deadline=deadline)
    except LlmUnavailable as exc:
        note = f"LLM unavailable for {step.name} ({exc}): {step.fallback} used"
        import openai  # loaded with the LLM client, which exists here

        if isinstance(exc.__cause__, openai.OpenAIError):
            return Outcome(fallback(), "offline", note + SKIPPED_FOR_THE_REST, llm_down=True)
        return Outcome(fallback(), "offline", note)
    value = validate(raw)  # type: ignore[arg-type]
    if value is None:
        return Outcome(fallback(), "offline", step.rejected)
    return Outcome(value, "llm")
