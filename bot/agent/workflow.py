"""The answer workflow: condense → route → retrieve and self-check (≤ 3 rounds) → cited answer or refusal.

A llama-index Workflow (the llama-index-workflows package) of small typed steps. Each event carries what
its next step needs: the `Question` (as the prepare step left it) and that step's own data. What a run
accumulates for its Answer — route, rounds, searched KBs, notes, timings, whether the LLM was used or is
down — is the workflow's typed per-run state, a `Trace` in `ctx.store`. What each step decides is the engine's
(bot.agent.engine: the policy modules, wired).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

# llama-index's Workflow lives in the llama-index-workflows package; `llama_index.core.workflow` only re-exports
# it, after importing all of llama_index.core (its indices, readers, NLTK): seconds of a cold start, unused here.
from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent
from workflows.plugins.basic import BasicRuntime
from workflows.runtime.types.plugin import RegisteredWorkflow

from bot.agent import grading, messages
from bot.agent.fallback import LlmAccess, Outcome
from bot.agent.llm import Deadline
from bot.agent.models import Answer, Citation, EvidenceNote, KbTarget, RoundTrace, Route, Status, Turn
from bot.agent.probing import evidence_of
from tools.search import Evidence

if TYPE_CHECKING:
    from bot.agent.engine import AnswerEngine

log = logging.getLogger(__name__)

MAX_ROUNDS = 3
TRACE_EVIDENCE = 5  # chunks per round kept in the trace ("how I found this")


# --- what flows between the steps -------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One question as the steps see it: what was asked, where it may be searched, by when; and, once
    prepared, its standalone form and the KBs worth searching."""

    # The workflow runtime writes a summary (the repr) of every event into each step's span: the thread, the
    # KB targets and the callbacks are left out of the repr, which was most of a question's event summaries.
    text: str
    history: tuple[Turn, ...] = field(repr=False)
    targets: Mapping[str, KbTarget] = field(repr=False)  # the KBs it may use (decided by the application layer)
    pinned: str | None = None
    preferred: tuple[str, ...] = ()  # of which the ones to search first (the channel's own)
    deadline: Deadline = field(default=Deadline(), repr=False)
    on_status: Callable[[str], None] | None = field(default=None, repr=False)
    language: str = "en"
    started: float = field(default_factory=time.perf_counter, repr=False)
    standalone: str = ""
    candidates: tuple[str, ...] = ()

    def status(self, text: str) -> None:
        if self.on_status is not None:
            try:
                self.on_status(text)
            except Exception:  # a status update must never break an answer
                log.debug("status callback failed", exc_info=True)


class Trace(BaseModel):
    """What a run accumulates for its Answer: the workflow's per-run state. Immutable: a step reads
    it from `ctx.store` and stores its successor (a cheap copy, unlike an edit of mutable state)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    route: Route = Field(default_factory=lambda: Route([], {}))
    rounds: tuple[RoundTrace, ...] = ()
    searched: tuple[str, ...] = ()
    tried: frozenset[tuple[str, tuple[str, ...]]] = frozenset()  # (query, KBs) searched: never twice
    notes: tuple[str, ...] = ()
    timings: Mapping[str, float] = Field(default_factory=dict)
    used_llm: bool = False
    llm_down: bool = False  # the LLM failed (transport/status) or time ran short: the rest is offline

    def but(self, **changes: object) -> Trace:
        return self.model_copy(update=changes)

    def noting(self, outcome: Outcome) -> Trace:
        """The trace after a step's outcome: its note, whether it used the LLM or switched it off."""
        return self.but(
            notes=(*self.notes, outcome.note) if outcome.note else self.notes,
            used_llm=self.used_llm or outcome.policy == "llm",
            llm_down=self.llm_down or outcome.llm_down,
        )

    def trying(self, query: str, kbs: Sequence[str]) -> Trace:
        return self.but(tried=self.tried | {(query, tuple(sorted(kbs)))})

    def timed(self, name: str, since: float) -> Trace:
        spent = round(self.timings.get(name, 0.0) + (time.perf_counter() - since) * 1000, 2)
        return self.but(timings={**self.timings, name: spent})

    def answer(self, question: Question, status: Status, text: str, citations: Sequence[Citation] = ()) -> Answer:
        """The Answer every surface renders: this trace, and what the last step said."""
        return Answer(
            status=status,
            answer=text,
            question=question.text,
            standalone_query=question.standalone,
            route=self.route,
            rounds=list(self.rounds),
            citations=list(citations),
            timings_ms={**self.timings, "total": round((time.perf_counter() - question.started) * 1000, 2)},
            mode="llm" if self.used_llm else "offline",
            language=question.language,
            notes=list(self.notes),
            searched_kbs=list(self.searched),
        )


@dataclass(frozen=True)
class Search:
    """A round to run: this query over these KBs, and why (for the status line)."""

    query: str
    kbs: list[str]
    why: str = ""


class AskEvent(StartEvent):
    question: Question
    notes: list[str]  # what was said about the question before it ran (e.g. truncated)


class QueryEvent(Event):
    """The standalone query is known; next: pick the KBs."""

    question: Question


class RetrieveEvent(Event):
    """Search these KBs with this query (a new round)."""

    question: Question
    search: Search


class EvidenceEvent(Event):
    """One round's evidence, to be checked."""

    question: Question
    query: str
    kbs: list[str]
    evidence: list[Evidence]


class ReformulateEvent(Event):
    """The round's evidence is not enough and rounds are left: plan the next one."""

    question: Question
    query: str
    kbs: list[str]
    verdict: grading.Verdict


class AnswerEvent(Event):
    """The evidence is sufficient; write the answer from it."""

    question: Question
    evidence: list[Evidence]
    relevant_ids: list[str]


class RefuseEvent(Event):
    """Say plainly that the knowledge bases don't contain the answer."""

    question: Question
    reason: str


# --- the workflow -----------------------------------------------------------------------------


class RegisteredOnceRuntime(BasicRuntime):
    """llama-index's basic in-process runtime, registering a workflow once. `BasicRuntime` keeps no
    registrations (its `get_registered` hook returns None), so each run registers the workflow again — twice
    (the run, then its control loop), wrapping every step each time. This one keeps a workflow's registration
    on the workflow until a step is added to its class (the version the runtime itself checks)."""

    def get_registered(self, workflow: Workflow) -> RegisteredWorkflow | None:
        kept = workflow.__dict__.get("_registration")
        if kept is not None and kept[0] is self and kept[1] == type(workflow)._step_functions_version:
            return kept[2]
        return None

    def register(self, workflow: Workflow) -> RegisteredWorkflow:
        registered = super().register(workflow)
        # The registration refers to its workflow: a cycle, freed with the workflow.
        workflow.__dict__["_registration"] = (self, type(workflow)._step_functions_version, registered)
        return registered


ANSWER_RUNTIME = RegisteredOnceRuntime()


class AnswerWorkflow(Workflow):
    def __init__(self, engine: AnswerEngine, **kwargs):
        kwargs.setdefault("runtime", ANSWER_RUNTIME)
        super().__init__(**kwargs)
        self.engine = engine

    def _get_steps(self) -> dict:
        """The runtime asks for the steps several times per run and each time inspects every attribute of the
        workflow (inspect.getmembers); they change only when a step is added to the class."""
        version = type(self)._step_functions_version
        cached = getattr(self, "_steps_cache", None)  # asked for already by Workflow.__init__
        if cached is None or cached[0] != version:
            cached = self._steps_cache = (version, super()._get_steps())
        return dict(cached[1])

    def llm_for(self, question: Question, trace: Trace) -> LlmAccess:
        return LlmAccess(self.engine.llm, trace.llm_down, question.deadline)

    @step
    async def prepare(self, ctx: Context[Trace], ev: AskEvent) -> QueryEvent | StopEvent:
        started = time.perf_counter()
        question, trace = ev.question, Trace(notes=tuple(ev.notes))
        candidates = self.engine.candidate_kbs(question.targets, question.pinned)
        if not candidates:
            question = replace(question, standalone=question.text)
            return StopEvent(
                result=trace.answer(question, "insufficient_context", messages.no_knowledge_base(question.language))
            )
        condensed = self.engine.condense(question.text, question.history, self.llm_for(question, trace))
        question = replace(
            question,
            standalone=condensed.value,
            candidates=tuple(candidates),
            preferred=() if question.pinned else tuple(kb for kb in question.preferred if kb in candidates),
        )
        await ctx.store.set_state(trace.noting(condensed).timed("condense", started))
        return QueryEvent(question=question)

    @step
    async def route(self, ctx: Context[Trace], ev: QueryEvent) -> EvidenceEvent:
        started = time.perf_counter()
        question, trace = ev.question, await ctx.store.get_state()
        # The channel's own KBs are probed first; others only if they cannot answer (a later round).
        first = list(question.preferred or question.candidates)
        question.status(f"Searching {', '.join(first)}…")
        prober = self.engine.prober
        probes = prober.probe(question.standalone, first, question.targets)
        if question.pinned:
            chosen, method = [question.pinned], "pinned"
        else:
            if len(probes) > 1:
                probes = prober.with_thread_scores(probes, question.history, question.targets)
            routed = self.engine.choose(question.standalone, probes, question.targets, self.llm_for(question, trace))
            chosen, method, trace = routed.value, routed.policy, trace.noting(routed)
        route = Route(chosen, {kb: float(p.score) for kb, p in probes.items()}, method)
        await ctx.store.set_state(trace.but(route=route).trying(question.standalone, chosen).timed("route", started))
        return EvidenceEvent(
            question=question, query=question.standalone, kbs=chosen, evidence=evidence_of(probes, chosen)
        )

    @step
    async def retrieve(self, ctx: Context[Trace], ev: RetrieveEvent) -> EvidenceEvent:
        started = time.perf_counter()
        question, search = ev.question, ev.search
        kbs = ", ".join(search.kbs)
        question.status(f"Searching {kbs} again ({search.why})…" if search.why else f"Searching {kbs}…")
        # A rephrased round's evidence is judged by the question it must answer (see grade).
        probes = self.engine.prober.probe(search.query, search.kbs, question.targets, judge=question.standalone)
        trace = await ctx.store.get_state()
        await ctx.store.set_state(trace.trying(search.query, search.kbs).timed("retrieve", started))
        return EvidenceEvent(
            question=question, query=search.query, kbs=search.kbs, evidence=evidence_of(probes, search.kbs)
        )

    @step
    async def grade(self, ctx: Context[Trace], ev: EvidenceEvent) -> AnswerEvent | ReformulateEvent | RefuseEvent:
        started = time.perf_counter()
        question, trace = ev.question, await ctx.store.get_state()
        searched = list(trace.searched)
        searched += [kb for kb in dict.fromkeys(ev.kbs) if kb not in searched]
        graded = self.engine.grade(
            question.standalone, ev.evidence, ev.kbs, self.llm_for(question, trace), asked=question.text
        )
        verdict = graded.value
        checked = RoundTrace(
            query=ev.query,
            kbs=list(ev.kbs),
            sufficient=verdict.sufficient,
            reason=verdict.reason,
            top_scores={e.chunk_id: round(e.score, 4) for e in ev.evidence[:3]},
            evidence_ids=[e.chunk_id for e in ev.evidence],
            policy=graded.policy,
            evidence=[
                EvidenceNote(
                    e.chunk_id,
                    e.chunk.kb,
                    e.chunk.document,
                    e.chunk.location,
                    round(float(e.score), 4),
                    round(float(e.cosine), 4),
                )
                for e in ev.evidence[:TRACE_EVIDENCE]
            ],
            features=verdict.features.as_dict() if verdict.features else {},
            sufficiency=verdict.score,
        )
        trace = trace.noting(graded).but(searched=tuple(searched), rounds=(*trace.rounds, checked))
        await ctx.store.set_state(trace.timed("grade", started))
        if verdict.sufficient:
            return AnswerEvent(question=question, evidence=ev.evidence, relevant_ids=list(verdict.relevant_ids))
        if len(trace.rounds) >= MAX_ROUNDS:
            return RefuseEvent(question=question, reason=verdict.reason)
        return ReformulateEvent(question=question, query=ev.query, kbs=ev.kbs, verdict=verdict)

    @step
    async def reformulate(self, ctx: Context[Trace], ev: ReformulateEvent) -> RetrieveEvent | RefuseEvent:
        question, trace = ev.question, await ctx.store.get_state()
        planned = self.engine.reformulate(question, ev.query, ev.kbs, ev.verdict, trace, self.llm_for(question, trace))
        await ctx.store.set_state(trace.noting(planned))
        if planned.value is None:
            return RefuseEvent(question=question, reason=ev.verdict.reason)
        return RetrieveEvent(question=question, search=planned.value)

    @step
    async def answer(self, ctx: Context[Trace], ev: AnswerEvent) -> StopEvent | RefuseEvent:
        started = time.perf_counter()
        question, trace = ev.question, await ctx.store.get_state()
        llm = self.llm_for(question, trace)
        if llm.usable:  # without the LLM the answer is picked at once: its reply would clear the status unread
            question.status("Writing the answer…")
        written = self.engine.write_answer(question, ev.evidence, ev.relevant_ids, llm, routed=trace.route.kbs)
        trace = trace.noting(written).timed("answer", started)
        if written.value is None:
            await ctx.store.set_state(trace)
            return RefuseEvent(question=question, reason="no statement in the evidence could be cited")
        return StopEvent(result=trace.answer(question, "answered", written.value.text, written.value.citations))

    @step
    async def refuse(self, ctx: Context[Trace], ev: RefuseEvent) -> StopEvent:
        question, trace = ev.question, await ctx.store.get_state()
        text = messages.insufficient_context(question.language, list(trace.searched or trace.route.kbs), ev.reason)
        return StopEvent(result=trace.answer(question, "insufficient_context", text))
