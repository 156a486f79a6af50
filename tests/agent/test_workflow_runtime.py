"""How the answer workflow is run: one long-lived event loop per answering thread, the workflow registered once
with llama-index's runtime. Real parts: the llama-index workflow runtime, asyncio, threads; the engine over the
synced sample store."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading

from workflows import Workflow, step
from workflows.events import StartEvent, StopEvent

from bot.agent.engine import run_on_thread_loop
from bot.agent.workflow import ANSWER_RUNTIME, AnswerWorkflow, RegisteredOnceRuntime

marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")


async def loop_and_marker(value: str | None = None) -> tuple[asyncio.AbstractEventLoop, str]:
    seen = marker.get()
    if value is not None:
        marker.set(value)  # left behind by this run: the next must not see it
    return asyncio.get_running_loop(), seen


def test_a_thread_runs_its_questions_on_one_loop_each_from_the_callers_context():
    first_loop, _ = run_on_thread_loop(loop_and_marker("set by the first run"))
    second_loop, seen = run_on_thread_loop(loop_and_marker())
    assert second_loop is first_loop and not first_loop.is_closed()
    assert seen == "unset"  # a run's context variables do not leak into the next run

    token = marker.set("the caller's")
    try:
        assert run_on_thread_loop(loop_and_marker())[1] == "the caller's"
    finally:
        marker.reset(token)


def test_each_thread_has_its_own_loop_closed_when_the_thread_ends():
    loops: list[asyncio.AbstractEventLoop] = []
    worker = threading.Thread(target=lambda: loops.append(run_on_thread_loop(loop_and_marker())[0]))
    worker.start()
    worker.join(timeout=30)
    here, _ = run_on_thread_loop(loop_and_marker())
    assert loops and loops[0] is not here
    gc.collect()
    assert loops[0].is_closed()


class Echo(StartEvent):
    text: str


class EchoWorkflow(Workflow):
    @step
    async def echo(self, ev: Echo) -> StopEvent:
        return StopEvent(result=ev.text.upper())


def shout(workflow: Workflow, text: str) -> str:
    async def run() -> str:
        return await workflow.run(start_event=Echo(text=text))

    return run_on_thread_loop(run())


def test_the_runtime_registers_a_workflow_once_for_all_its_runs():
    runtime = RegisteredOnceRuntime()
    workflow = EchoWorkflow(timeout=None, runtime=runtime)
    assert runtime.get_registered(workflow) is None
    assert shout(workflow, "a") == "A"
    registered = runtime.get_registered(workflow)
    assert registered is not None and registered.workflow is workflow
    assert [shout(workflow, t) for t in ("b", "c")] == ["B", "C"]
    assert runtime.get_registered(workflow) is registered  # not registered again for each run

    other = EchoWorkflow(timeout=None, runtime=runtime)  # another instance has its own
    assert shout(other, "d") == "D"
    assert runtime.get_registered(other).workflow is other
    assert RegisteredOnceRuntime().get_registered(workflow) is None  # and another runtime knows none of them


def test_the_engine_answers_the_same_on_a_reused_loop(offline_engine):
    assert offline_engine._workflow.runtime is ANSWER_RUNTIME
    assert isinstance(offline_engine._workflow, AnswerWorkflow)
    question = "How many vacation days do full-time staff get per year?"
    first, second = offline_engine.answer(question), offline_engine.answer(question)
    assert first.status == second.status == "answered"
    assert (first.answer, first.citations, first.rounds) == (second.answer, second.citations, second.rounds)
