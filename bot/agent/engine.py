"""The answer engine: condense → route → retrieve and self-check (≤ 3 rounds) → cited answer or refusal.

A llama-index Workflow of small typed steps. Each event carries what its next step needs: the
`Question` (as the prepare step left it) and that step's own data. What a run accumulates for its
Answer — route, rounds, searched KBs, notes, timings, whether the LLM was used or is down — is the
workflow's typed per-run state, a `Trace` in `ctx.store`.

The policies behind the steps live in their modules (condense, routing, grading, answering: an
offline rule, a prompt and a schema each; probing for retrieval). `AnswerEngine` wires them: with
an LLM configured, each step asks it first and falls back to its offline policy on any failure
(bot.agent.fallback); with no key, the offline policies are the engine.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from llama_index.core.workflow import Context, Event, StartEvent, StopEvent, Workflow, step
from pydantic import BaseModel, ConfigDict, Field

from bot.agent import answering, condense, fallback, grading, messages, routing
from bot.agent.fallback import LlmAccess, Outcome, llm_step, offline
from bot.agent.llm import Deadline, LlmClient
from bot.agent.models import Answer, Citation, EmptyQuestion, KbTarget, RoundTrace, Route, Turn
from bot.agent.probing import Prober, Probes, evidence_of
from bot.config import Settings
from tools.search import Evidence, HybridSearcher
from tools.service import KnowledgeService
from tools.text import content_terms, has_cjk, keyword_terms

log = logging.getLogger(__name__)

MAX_ROUNDS = 3
MAX_QUESTION_CHARS = 2000


# --- what flows between the steps -------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One question as the steps see it: what was asked, where it may be searched, by when; and, once
    prepared, its standalone form and the KBs worth searching."""

    text: str
    history: tuple[Turn, ...]
    targets: Mapping[str, KbTarget]  # the KBs it may use (decided by the application layer)
    pinned: str | None = None
    preferred: tuple[str, ...] = ()  # of which the ones to search first (the channel's own)
    deadline: Deadline = Deadline()
    on_status: Callable[[str], None] | None = None
    language: str = "en"
    started: float = field(default_factory=time.perf_counter)
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


class AnswerWorkflow(Workflow):
    def __init__(self, engine: AnswerEngine, **kwargs):
        super().__init__(**kwargs)
        self.engine = engine

    def llm_for(self, question: Question, trace: Trace) -> LlmAccess:
        return LlmAccess(self.engine.llm, trace.llm_down, question.deadline)

    @step
    async def prepare(self, ctx: Context[Trace], ev: AskEvent) -> QueryEvent | StopEvent:
        started = time.perf_counter()
        question, trace = ev.question, Trace(notes=tuple(ev.notes))
        candidates = self.engine.candidate_kbs(question.targets, question.pinned)
        if not candidates:
            question = replace(question, standalone=question.text)
            return StopEvent(result=self.engine.refusal(question, trace, messages.no_knowledge_base(question.language)))
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
        return EvidenceEvent(question=question, query=question.standalone, kbs=chosen, evidence=evidence_of(probes, chosen))

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
        return EvidenceEvent(question=question, query=search.query, kbs=search.kbs, evidence=evidence_of(probes, search.kbs))

    @step
    async def grade(self, ctx: Context[Trace], ev: EvidenceEvent) -> AnswerEvent | ReformulateEvent | RefuseEvent:
        started = time.perf_counter()
        question, trace = ev.question, await ctx.store.get_state()
        searched = list(trace.searched)
        searched += [kb for kb in dict.fromkeys(ev.kbs) if kb not in searched]
        graded = self.engine.grade(question.standalone, ev.evidence, ev.kbs, self.llm_for(question, trace))
        verdict = graded.value
        checked = RoundTrace(
            query=ev.query,
            kbs=list(ev.kbs),
            sufficient=verdict.sufficient,
            reason=verdict.reason,
            top_scores={e.chunk_id: round(e.score, 4) for e in ev.evidence[:3]},
            evidence_ids=[e.chunk_id for e in ev.evidence],
            policy=graded.policy,
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
        question.status("Writing the answer…")
        written = self.engine.write_answer(question, ev.evidence, ev.relevant_ids, self.llm_for(question, trace))
        trace = trace.noting(written).timed("answer", started)
        if written.value is None:
            await ctx.store.set_state(trace)
            return RefuseEvent(question=question, reason="no statement in the evidence could be cited")
        return StopEvent(result=self.engine.answered(question, trace, written.value))

    @step
    async def refuse(self, ctx: Context[Trace], ev: RefuseEvent) -> StopEvent:
        question, trace = ev.question, await ctx.store.get_state()
        text = messages.insufficient_context(question.language, list(trace.searched or trace.route.kbs), ev.reason)
        return StopEvent(result=self.engine.refusal(question, trace, text))


# --- the engine: the policies behind the steps, wired -----------------------------------------


class AnswerEngine:
    def __init__(self, service: KnowledgeService, settings: Settings | None = None, llm: LlmClient | None = None):
        """`settings` configure the LLM; without them (or without a key) the engine is offline."""
        self.service = service
        self.settings = settings
        if llm is None and settings is not None and settings.llm_enabled:
            llm = LlmClient(settings)
        self.llm = llm
        self.searcher = HybridSearcher(service.store, service.embedder)
        self.prober = Prober(self.searcher)
        self._workflow = AnswerWorkflow(engine=self, timeout=None)

    @property
    def mode(self) -> str:
        return "llm" if self.llm is not None else "offline"

    # --- entry points ------------------------------------------------------------------------

    def answer(
        self,
        question: str,
        history: Sequence[Turn] = (),
        kb: str | None = None,
        *,
        kbs: Sequence[KbTarget] | None = None,
        preferred: Sequence[str] = (),
        on_status: Callable[[str], None] | None = None,
        deadline: float | None = None,
    ) -> Answer:
        """Answer one question from the KBs `kbs` (searching `preferred` first), or only `kb`. Who may
        use which KB is decided above this layer (bot.core); `kbs=None` means every KB in the store.
        With a `deadline` (seconds from now), an LLM step is skipped when too little time is left for
        it and each LLM request ends by then; the offline policies always finish the answer.
        Raises EmptyQuestion for a question with no words; never anything else for bad input."""
        return asyncio.run(
            self.aanswer(question, history, kb, kbs=kbs, preferred=preferred, on_status=on_status, deadline=deadline)
        )

    async def aanswer(
        self,
        question: str,
        history: Sequence[Turn] = (),
        kb: str | None = None,
        *,
        kbs: Sequence[KbTarget] | None = None,
        preferred: Sequence[str] = (),
        on_status: Callable[[str], None] | None = None,
        deadline: float | None = None,
    ) -> Answer:
        started, until = time.perf_counter(), Deadline.after(deadline)
        if kbs is None:
            if kb is not None:
                self.service.store.require_kb(kb)  # a clear error for an unknown KB
            kbs = [KbTarget(r.name, r.description) for r in self.service.store.registry.list_kbs()]
        text, notes = self._clean_question(question)
        asked = Question(
            text=text, history=tuple(history), targets={t.name: t for t in kbs}, pinned=kb, preferred=tuple(preferred),
            deadline=until, on_status=on_status, language=messages.language_of(text), started=started,
        )
        answer: Answer = await self._workflow.run(start_event=AskEvent(question=asked, notes=notes))
        return answer

    def standalone_query(self, question: str, history: Sequence[Turn]) -> str:
        """The condense step on its own: the follow-up as a question that stands alone."""
        text, _ = self._clean_question(question)
        return self.condense(text, tuple(history), LlmAccess(self.llm)).value

    # --- prepare -----------------------------------------------------------------------------

    @staticmethod
    def _clean_question(question: str) -> tuple[str, list[str]]:
        """The question with its whitespace normalised and cut to MAX_QUESTION_CHARS, and what was said about it."""
        text = " ".join((question or "").split())
        if not text or not any(ch.isalnum() for ch in text):
            raise EmptyQuestion("the question is empty: ask me something about your documents")
        if len(text) > MAX_QUESTION_CHARS:
            return text[:MAX_QUESTION_CHARS].rsplit(" ", 1)[0], [messages.truncated_note(MAX_QUESTION_CHARS)]
        return text, []

    def candidate_kbs(self, targets: Mapping[str, KbTarget], pinned: str | None) -> list[str]:
        """The KBs worth searching: those that may be used and hold live documents (or only the pinned one)."""
        if pinned is not None:
            return [pinned] if pinned in targets else []
        return [kb for kb in sorted(targets) if self.service.store.live_versions(kb)]

    def condense(self, question: str, history: Sequence[Turn], llm: LlmAccess) -> Outcome[str]:
        if not history:
            return offline(question)

        def usable(result: condense.CondensedQuery) -> str | None:
            query = " ".join(result.standalone_query.split())
            # A rewrite must be about the conversation: one that shares no term with it (a small
            # model answered "standalone_querry") would derail every later step.
            said = content_terms(" ".join([question, *(t.text for t in history[-condense.MAX_HISTORY_TURNS :])]))
            fits = bool(query) and len(query) <= 4 * max(len(question), 200)
            return query if fits and content_terms(query) & said else None

        return llm_step(
            fallback.CONDENSE,
            llm,
            lambda client, deadline: client.structured(
                condense.condense_messages(question, history), condense.CondensedQuery, deadline=deadline
            ),
            usable,
            lambda: condense.condense_offline(question, history, self.word_similarity),
        )

    def word_similarity(self, a: list[str], b: list[str]) -> np.ndarray:
        embedder = self.service.embedder
        left = np.stack([embedder.embed_query(w) for w in a])
        right = np.stack([embedder.embed_query(w) for w in b])
        return left @ right.T

    # --- route -------------------------------------------------------------------------------

    def choose(self, query: str, probes: Probes, targets: Mapping[str, KbTarget], llm: LlmAccess) -> Outcome[list[str]]:
        """Which of the probed KBs to search. The LLM may only pick among them."""
        descriptions = {kb: t.description for kb, t in targets.items()}

        def searchable(choice: routing.RouteChoice) -> list[str] | None:
            return [kb for kb in dict.fromkeys(choice.kbs) if kb in probes][:2] or None

        return llm_step(
            fallback.ROUTE,
            llm,
            lambda client, deadline: client.structured(
                routing.route_messages(query, list(probes.values()), descriptions), routing.RouteChoice, deadline=deadline
            ),
            searchable,
            lambda: routing.choose_kbs(list(probes.values())),
            wanted=len(probes) > 1,
        )

    # --- grade / reformulate -----------------------------------------------------------------

    def term_known(self, kbs: Sequence[str]) -> Callable[[str], bool]:
        indexes = [self.service.store.keyword_index(kb) for kb in kbs]
        return lambda term: any(index.knows(term) for index in indexes)

    def grade(self, query: str, evidence: list[Evidence], kbs: Sequence[str], llm: LlmAccess) -> Outcome[grading.Verdict]:
        """Is the evidence enough to answer the standalone `query`? Always judged against it (cosine and
        coverage): a reformulation may find new evidence, never lower the bar."""
        known = self.term_known(kbs)
        # CJK bigrams that straddle two words never occur in any text; count only those the KB knows.
        query_terms = {t for t in content_terms(query) if not has_cjk(t) or known(t)}
        for e in evidence:
            e.coverage = len(query_terms & content_terms(f"{e.chunk.header}\n{e.chunk.text}")) / max(len(query_terms), 1)
        verdict = grading.grade_offline(query, evidence, known)
        # Whatever an offline rule accepted, the LLM reads. A missing name is a fact, not a judgement
        # call, and evidence too weak for any offline rule is not worth a call.
        worth_asking = bool(evidence) and (
            verdict.sufficient
            or ("never mentions" not in verdict.reason and max(e.cosine for e in evidence) >= grading.MIN_COSINE)
        )
        labels = {f"E{i + 1}": e.chunk_id for i, e in enumerate(evidence)}

        def judged(answer: grading.GradeVerdict) -> grading.Verdict:
            relevant = tuple(labels[r] for r in answer.relevant_ids if r in labels)
            if answer.sufficient and not relevant:  # "sufficient", but citing no passage it was shown
                reason = "the LLM named no valid passage as relevant"
            else:
                reason = "the evidence answers the question" if answer.sufficient else f"missing: {answer.missing or 'unspecified'}"
            return grading.Verdict(answer.sufficient and bool(relevant), reason, relevant, answer.missing)

        return llm_step(
            fallback.GRADE,
            llm,
            lambda client, deadline: client.structured(
                grading.grade_messages(query, evidence), grading.GradeVerdict, deadline=deadline
            ),
            judged,
            lambda: verdict,
            wanted=worth_asking,
        )

    def reformulate(
        self, question: Question, query: str, kbs: list[str], verdict: grading.Verdict, trace: Trace, llm: LlmAccess
    ) -> Outcome[Search | None]:
        """The next round: widen to KBs not yet searched, or rephrase the query; never repeat a round."""
        others = [kb for kb in question.candidates if kb not in trace.searched]

        def untried(search: Search) -> Search | None:
            return search if search.query and search.kbs and (search.query, tuple(sorted(search.kbs))) not in trace.tried else None

        def rephrased(rewrite: condense.CondensedQuery) -> Search | None:
            return untried(Search(" ".join(rewrite.standalone_query.split()), kbs + others, "rephrased"))

        def offline_next() -> Search | None:
            return next(filter(None, map(untried, self._offline_reformulations(question, trace.route.kbs, others))), None)

        missed = (
            f"{question.standalone}\n(The previous search for '{query}' missed: {verdict.missing or verdict.reason}. "
            "Rewrite the search query to find it.)"
        )
        return llm_step(
            fallback.REFORMULATE,
            llm,
            lambda client, deadline: client.structured(
                condense.condense_messages(missed, question.history), condense.CondensedQuery, deadline=deadline
            ),
            rephrased,
            offline_next,
        )

    @staticmethod
    def _offline_reformulations(question: Question, routed: list[str], others: list[str]) -> Iterator[Search]:
        keywords = " ".join(condense.content_words(question.standalone))
        # 1. The channel narrowed the first round: the channel's KBs could not answer, try the others.
        if question.preferred and others:
            yield Search(question.standalone, others, "other knowledge bases")
        # 2. Keywords only, on the KBs the router chose: chatty questions dilute both scores.
        yield Search(keywords, list(routed), "keywords only")
        # 3. Widen: every KB the question may use.
        yield Search(keywords, list(question.candidates), "all knowledge bases")

    # --- answer ------------------------------------------------------------------------------

    def write_answer(
        self, question: Question, evidence: list[Evidence], relevant_ids: list[str], llm: LlmAccess
    ) -> Outcome[answering.DraftAnswer | None]:
        chosen = answering.select_evidence(evidence, relevant_ids)
        return llm_step(
            fallback.ANSWER,
            llm,
            lambda client, deadline: client.complete(answering.answer_messages(question.standalone, chosen), deadline=deadline),
            lambda text: answering.validate_llm_answer(text, chosen),
            lambda: self._extractive_answer(question, chosen),
        )

    def _extractive_answer(self, question: Question, chosen: list[Evidence]) -> answering.DraftAnswer | None:
        embedder = self.service.embedder
        # A follow-up's own words ("contractors") are what it asks about; the words carried over
        # from the conversation only place it.
        focus = content_terms(question.text) if question.standalone != question.text else set()
        saved = self.service.store.unit_vectors(embedder.model_name, embedder.dimension, [e.chunk for e in chosen])
        return answering.extractive_answer(
            question.standalone,
            chosen,
            embedder.embed_query(question.standalone),
            self.embed_sentences,
            focus=focus,
            unit_vectors=saved,
            asked=question.text,
        )

    def embed_sentences(self, texts: list[str]) -> np.ndarray:
        """Evidence sentences with no vector saved at ingest (chunks embedded by a backend that cannot
        pool sentence spans). With the local model each is encoded like a query: on one torch thread,
        which beats a batch on a small shared machine, and cached, because the same evidence
        sentences come back question after question (docs/benchmarks.md)."""
        embedder = self.service.embedder
        if self.service.settings.embedding_backend != "local" or not texts:
            return embedder.embed_documents(texts)
        return np.stack([embedder.embed_query(t) for t in texts])

    # --- the Answer --------------------------------------------------------------------------

    def _finish(self, question: Question, trace: Trace, status: str, text: str, citations: list[Citation]) -> Answer:
        timings = {**trace.timings, "total": round((time.perf_counter() - question.started) * 1000, 2)}
        return Answer(
            status=status,  # type: ignore[arg-type]
            answer=text,
            question=question.text,
            standalone_query=question.standalone,
            route=trace.route,
            rounds=list(trace.rounds),
            citations=citations,
            timings_ms=timings,
            mode="llm" if trace.used_llm else "offline",
            language=question.language,
            notes=list(trace.notes),
            searched_kbs=list(trace.searched),
        )

    def answered(self, question: Question, trace: Trace, draft: answering.DraftAnswer) -> Answer:
        return self._finish(question, trace, "answered", draft.text, draft.citations)

    def refusal(self, question: Question, trace: Trace, text: str) -> Answer:
        return self._finish(question, trace, "insufficient_context", text, [])


__all__ = ["AnswerEngine", "EmptyQuestion", "keyword_terms"]
