"""The LLM behind condense/route/grade/answer: the `openai` client, retried with tenacity.

Every structured call is validated against a pydantic model; anything that fails (transport,
status, JSON, schema) raises `LlmUnavailable`, and the caller falls back to the offline policy for
that step and notes it in the trace (bot.agent.fallback). Nothing here ever crashes a question.

A call may be given the question's `Deadline`: each request's timeout, and the retries with their
waits, then fit in the time left before it, less what the offline policies need to finish.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay

from bot.config import Settings

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

Model = TypeVar("Model", bound=BaseModel)

MAX_ATTEMPTS = 4
MAX_TOTAL_SECONDS = 25.0
MAX_BACKOFF_SECONDS = 8.0


# Under a deadline: the offline policies get this long to finish after the LLM gives up, and a
# request with less than MIN_REQUEST_SECONDS of its own is not worth sending.
OFFLINE_RESERVE_SECONDS = 0.5
MIN_REQUEST_SECONDS = 0.5


class LlmUnavailable(RuntimeError):
    """This step cannot use the LLM (after retries); str(exc) says why, without secrets."""


@dataclass(frozen=True)
class Deadline:
    """When the question must be answered (`time.monotonic()`), or never (`at=None`)."""

    at: float | None = None

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """`seconds` from now; None (or infinity) is no deadline, zero or less leaves no time for the LLM."""
        if seconds is None or seconds == math.inf:
            return cls()
        if not isinstance(seconds, int | float) or math.isnan(seconds):
            raise ValueError(f"a deadline is a number of seconds, not {seconds!r}")
        return cls(time.monotonic() + max(float(seconds), 0.0))

    def left(self) -> float:
        """Seconds until the deadline (infinity without one)."""
        return math.inf if self.at is None else max(self.at - time.monotonic(), 0.0)

    def llm_seconds(self) -> float:
        """What an LLM request may take now: the time left, less the offline policies' reserve."""
        return self.left() - OFFLINE_RESERVE_SECONDS

    def allows_request(self, after_wait: float = 0.0) -> bool:
        """Whether a request (started after waiting `after_wait` seconds) still has time to succeed."""
        return self.llm_seconds() - after_wait >= MIN_REQUEST_SECONDS


NO_DEADLINE = Deadline()


def _retryable(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError | openai.RateLimitError):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


def _wait(state: RetryCallState) -> float:
    """Honour Retry-After when the server sends it; otherwise exponential backoff."""
    exc = state.outcome.exception() if state.outcome else None
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    if header:
        try:
            seconds = float(header)
        except ValueError:  # an HTTP date: back off as usual
            seconds = -1.0
        # A negative or NaN header must not reach time.sleep (ValueError: the question would crash).
        if math.isfinite(seconds) and seconds >= 0:
            return min(seconds, MAX_BACKOFF_SECONDS)
        if seconds == math.inf:
            return MAX_BACKOFF_SECONDS
    return min(0.5 * 2 ** (state.attempt_number - 1), MAX_BACKOFF_SECONDS)


class LlmClient:
    def __init__(self, settings: Settings):
        assert settings.openai_api_key is not None
        # Imported with the first client: offline mode never needs the package (a second of a cold start).
        import openai

        # Retries are ours (tenacity), so the client's own are off: one policy, one budget.
        self._client = openai.OpenAI(
            api_key=settings.openai_api_key.get_secret_value(),
            base_url=settings.openai_base_url,
            timeout=settings.llm_timeout_s,
            max_retries=0,
        )
        self.model = settings.chat_model
        self.timeout = settings.llm_timeout_s

    def _complete(self, messages: list[dict], response_format: dict | None, max_tokens: int, deadline: Deadline) -> str:
        """One chat completion, retried on 429, 5xx and timeouts within the retry budget and the deadline."""
        import openai

        cut_short = False

        def out_of_time(state: RetryCallState) -> bool:  # no time left to wait and send another request
            nonlocal cut_short
            cut_short = not deadline.allows_request(after_wait=state.upcoming_sleep)
            return cut_short

        retrying = Retrying(
            retry=retry_if_exception(_retryable),
            wait=_wait,
            # (evaluated in order: out_of_time only while the retry budget would allow another attempt)
            stop=stop_after_attempt(MAX_ATTEMPTS) | stop_after_delay(MAX_TOTAL_SECONDS) | out_of_time,
            reraise=True,
        )
        try:
            return retrying(self._request, messages, response_format, max_tokens, deadline)
        except openai.OpenAIError as exc:
            why = _describe(exc) + (", no time left to retry before the question's deadline" if cut_short else "")
            raise LlmUnavailable(why) from exc

    def _request(self, messages: list[dict], response_format: dict | None, max_tokens: int, deadline: Deadline) -> str:
        kwargs: dict = {"model": self.model, "messages": messages, "temperature": 0, "max_tokens": max_tokens}
        if response_format is not None:
            kwargs["response_format"] = response_format
        if deadline.at is not None:
            kwargs["timeout"] = max(min(self.timeout, deadline.llm_seconds()), 0.01)
        response = self._client.chat.completions.create(**kwargs)
        # A server that is "OpenAI-compatible" only in name may answer 200 with HTML, a bare string,
        # a choice without a message, or non-text content: none of it may crash the question.
        try:
            content = response.choices[0].message.content if response.choices else None
        except (AttributeError, IndexError, KeyError, TypeError):
            raise LlmUnavailable("the server's reply was not a chat completion") from None
        if not isinstance(content, str) or not content.strip():
            raise LlmUnavailable("the model returned no content")
        return content

    def complete(self, messages: list[dict], max_tokens: int = 600, deadline: Deadline = NO_DEADLINE) -> str:
        started = time.perf_counter()
        try:
            return self._complete(messages, None, max_tokens, deadline)
        finally:
            log.debug("llm text call %.0f ms", (time.perf_counter() - started) * 1000)

    def structured(
        self, messages: list[dict], schema: type[Model], max_tokens: int = 400, deadline: Deadline = NO_DEADLINE
    ) -> Model:
        """A JSON answer validated against `schema` (strict json_schema response format)."""
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": _strict_schema(schema), "strict": True},
        }
        content = self._complete(messages, response_format, max_tokens, deadline)
        try:
            return schema.model_validate(json.loads(_strip_fences(content)))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise LlmUnavailable(f"malformed {schema.__name__} output ({type(exc).__name__})") from exc


def _describe(exc: openai.OpenAIError) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "")


def _strip_fences(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("{") :] if "{" in text else text
    return text


def _strict_schema(schema: type[BaseModel]) -> dict:
    """OpenAI strict mode wants every property required and no extra properties."""
    spec = schema.model_json_schema()

    def tighten(node: dict) -> None:
        if node.get("type") == "object" and "properties" in node:
            node["required"] = list(node["properties"])
            node["additionalProperties"] = False
            for child in node["properties"].values():
                tighten(child)
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            tighten(node["items"])
        for definition in node.get("$defs", {}).values():
            tighten(definition)

    tighten(spec)
    return spec
