"""The answer engine: the policy modules behind the answer workflow's steps, wired.

The steps and what flows between them are bot.agent.workflow (condense → route → retrieve and
self-check, at most three rounds → cited answer or refusal). The policies are in their modules —
condense, routing, grading, answering: an offline rule, a prompt and a schema each; probing for
retrieval — and `AnswerEngine` wires them to the store, the embedder and the LLM: with an LLM
configured, each step asks it first and falls back to its offline policy on any failure
(bot.agent.fallback); with no key, the offline policies are the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from bot.agent import answering, condense, fallback, grading, messages, routing, sufficiency
from bot.agent.fallback import LlmAccess, Outcome, llm_step, offline
from bot.agent.llm import Deadline, LlmClient
from bot.agent.models import Answer, EmptyQuestion, KbTarget, Turn
from bot.agent.probing import Prober, Probes
from bot.agent.workflow import MAX_ROUNDS, AnswerWorkflow, AskEvent, Question, Search, Trace
from bot.config import Settings
from tools.search import Evidence, HybridSearcher
from tools.service import KnowledgeService
from tools.text import keyword_terms, valued_terms

MAX_QUESTION_CHARS = 2000

T = TypeVar("T")


class _ThreadLoop:
    """One thread's event loop, kept for the thread's life: `asyncio.run` builds and tears down a loop (a
    selector, a self-pipe, the default executor's shutdown) for every question, on the answering thread. A
    thread still runs one question at a time, each in a fresh copy of the caller's context variables (the
    workflow runtime keeps its run id and spans there), as under `asyncio.run`."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coroutine, context=contextvars.copy_context())

    def __del__(self) -> None:  # the thread ended: nothing of its last question is left on the loop
        with contextlib.suppress(RuntimeError):
            self.runner.close()


_thread_loops = threading.local()


def run_on_thread_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run`, on this thread's own long-lived loop."""
    own: _ThreadLoop | None = getattr(_thread_loops, "loop", None)
    if own is None:
        own = _thread_loops.loop = _ThreadLoop()
    return own.run(coroutine)


class AnswerEngine:
    """Answers questions from the knowledge bases: the workflow's steps run these policies."""

    def __init__(self, service: KnowledgeService, settings: Settings | None = None, llm: LlmClient | None = None):
        """`settings` configure the LLM; without them (or without a key) the engine is offline."""
        self.service = service
        self.settings = settings
        sufficiency.model()  # read (and checked) now: every offline verdict is scored by it, so none starts without it
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
        return run_on_thread_loop(
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
            text=text,
            history=tuple(history),
            targets={t.name: t for t in kbs},
            pinned=kb,
            preferred=tuple(preferred),
            deadline=until,
            on_status=on_status,
            language=messages.language_of(text),
            started=started,
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
        return llm_step(
            fallback.CONDENSE,
            llm,
            lambda: condense.condense_messages(question, history),
            condense.CondensedQuery,
            lambda rewrite: condense.usable_rewrite(rewrite, question, history),
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
        disclaiming = [
            kb
            for kb, probe in probes.items()
            if probe.result.evidence and answering.leaves_to_another(probe.result.evidence[0].chunk.text, query)
        ]
        return llm_step(
            fallback.ROUTE,
            llm,
            lambda: routing.route_messages(query, list(probes.values()), descriptions),
            routing.RouteChoice,
            lambda choice: routing.usable_choice(choice, probes),
            lambda: routing.choose_kbs(list(probes.values()), disclaiming),
            wanted=len(probes) > 1,
        )

    # --- grade / reformulate -----------------------------------------------------------------

    def term_known(self, kbs: Sequence[str]) -> Callable[[str], bool]:
        indexes = [self.service.store.keyword_index(kb) for kb in kbs]
        return lambda term: any(index.knows(term) for index in indexes)

    def grade(
        self, query: str, evidence: list[Evidence], kbs: Sequence[str], llm: LlmAccess, asked: str = ""
    ) -> Outcome[grading.Verdict]:
        """Is the evidence enough to answer the standalone `query`? Always judged against it (cosine and
        coverage): a reformulation may find new evidence, never lower the bar. `asked`: the person's own
        message, when `query` condenses a follow-up."""
        known = self.term_known(kbs)
        grading.measure_coverage(query, evidence, known)
        verdict = grading.grade_offline(query, evidence, known, self.answer_units(query, evidence, known), asked)
        return llm_step(
            fallback.GRADE,
            llm,
            lambda: grading.grade_messages(query, evidence),
            grading.GradeVerdict,
            lambda answer: grading.llm_verdict(answer, evidence),
            lambda: verdict,
            wanted=grading.worth_asking(verdict, evidence),
        )

    def answer_units(
        self, query: str, evidence: list[Evidence], term_known: Callable[[str], bool] | None = None
    ) -> list[grading.UnitMatch]:
        """The best chunks' answer units, measured against the query by the vectors saved at ingest."""
        top = evidence[: grading.UNIT_CHUNKS]
        if not top:
            return []
        embedder = self.service.embedder
        saved = self.service.store.unit_vectors(embedder.model_name, embedder.dimension, [e.chunk for e in top])
        if not saved:
            return []
        return grading.unit_matches(query, top, embedder.embed_query(query), saved, term_known)

    def reformulate(
        self, question: Question, query: str, kbs: list[str], verdict: grading.Verdict, trace: Trace, llm: LlmAccess
    ) -> Outcome[Search | None]:
        """The next round: widen to KBs not yet searched, or rephrase the query; never repeat a round."""
        others = [kb for kb in question.candidates if kb not in trace.searched]

        def untried(search: Search) -> Search | None:
            return (
                search
                if search.query and search.kbs and (search.query, tuple(sorted(search.kbs))) not in trace.tried
                else None
            )

        def rephrased(rewrite: condense.CondensedQuery) -> Search | None:
            return untried(Search(" ".join(rewrite.standalone_query.split()), kbs + others, "rephrased"))

        def offline_next() -> Search | None:
            return next(
                filter(None, map(untried, self._offline_reformulations(question, trace.route.kbs, others))), None
            )

        missed = (
            f"{question.standalone}\n(The previous search for '{query}' missed: {verdict.missing or verdict.reason}. "
            "Rewrite the search query to find it.)"
        )
        return llm_step(
            fallback.REFORMULATE,
            llm,
            lambda: condense.condense_messages(missed, question.history),
            condense.CondensedQuery,
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
        self,
        question: Question,
        evidence: list[Evidence],
        relevant_ids: list[str],
        llm: LlmAccess,
        routed: Sequence[str] = (),
    ) -> Outcome[answering.DraftAnswer | None]:
        """The cited answer from `evidence`; `routed`: the KBs the router chose, best first (the answer
        leads with the top one's best sentence)."""
        chosen = answering.select_evidence(evidence, relevant_ids)
        return llm_step(
            fallback.ANSWER,
            llm,
            lambda: answering.answer_messages(question.standalone, chosen),
            None,  # a text answer, not JSON
            lambda text: answering.validate_llm_answer(text, chosen),
            lambda: self._extractive_answer(question, chosen, routed),
        )

    def _extractive_answer(
        self, question: Question, chosen: list[Evidence], routed: Sequence[str] = ()
    ) -> answering.DraftAnswer | None:
        embedder = self.service.embedder
        # A follow-up's own words ("contractors") are what it asks about; the words carried over
        # from the conversation only place it.
        focus = set(valued_terms(question.text)) if question.standalone != question.text else set()
        saved = self.service.store.unit_vectors(embedder.model_name, embedder.dimension, [e.chunk for e in chosen])
        # "and if I don't?", "and for contractors?" ask for something else: the sentence the thread was just
        # told is not it.
        told = (
            answering.already_said(question.history)
            if condense.asks_for_something_else(question.text, question.history)
            else set()
        )
        return answering.extractive_answer(
            question.standalone,
            chosen,
            embedder.embed_query(question.standalone),
            self.embed_sentences,
            focus=focus,
            unit_vectors=saved,
            asked=question.text,
            routed=routed,
            avoid=told,
            next_step=condense.what_next_kind(question.text) if told else "",
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


__all__ = ["MAX_QUESTION_CHARS", "MAX_ROUNDS", "AnswerEngine", "EmptyQuestion", "keyword_terms"]
