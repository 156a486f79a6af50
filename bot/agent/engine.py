"""The answer engine: condense → route → retrieve and self-check (≤ 3 rounds) → cited answer or refusal.

Written as a llama-index Workflow: each step is small and typed, and the events name the data that
flows between them. With an LLM configured, condense/route/grade/answer ask it first and fall back
to the offline policy for that step on any failure; with no key, the offline policies are the engine.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import openai
from llama_index.core.workflow import Event, StartEvent, StopEvent, Workflow, step

from bot.agent import answering, condense, grading, messages, routing
from bot.agent.llm import LlmClient, LlmUnavailable
from bot.agent.models import Answer, Citation, EmptyQuestion, KbTarget, RoundTrace, Route, Turn
from bot.config import Settings
from tools.search import Evidence, HybridSearcher, SearchResult
from tools.service import KnowledgeService
from tools.text import content_terms, has_cjk, identifiers, keyword_terms

log = logging.getLogger(__name__)

MAX_ROUNDS = 3
MAX_QUESTION_CHARS = 2000
EVIDENCE_PER_KB = 8
EVIDENCE_TOTAL = 8


# --- the data that flows ----------------------------------------------------------------------


@dataclass
class Run:
    """Everything one question accumulates on its way through the steps."""

    question: str
    history: Sequence[Turn]
    pinned_kb: str | None
    targets: dict[str, KbTarget]  # the KBs this question may use (decided by the application layer)
    preferred: list[str]  # of which the ones to search first (the channel's own)
    on_status: Callable[[str], None] | None
    language: str = "en"
    standalone: str = ""
    candidates: list[str] = field(default_factory=list)
    route: Route = field(default_factory=lambda: Route([], {}))
    probes: dict[str, routing.KbProbe] = field(default_factory=dict)
    rounds: list[RoundTrace] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)
    tried: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    used_llm: bool = False
    llm_down: bool = False  # the LLM failed (transport/status) once: the rest of this question is offline
    started: float = field(default_factory=time.perf_counter)

    def status(self, text: str) -> None:
        if self.on_status is not None:
            try:
                self.on_status(text)
            except Exception:  # a status update must never break an answer
                log.debug("status callback failed", exc_info=True)

    def timed(self, name: str, since: float) -> None:
        self.timings[name] = round(self.timings.get(name, 0.0) + (time.perf_counter() - since) * 1000, 2)


class AskEvent(StartEvent):
    run: Run


class QueryEvent(Event):
    """The standalone query is known; next: pick the KBs."""

    run: Run


class RetrieveEvent(Event):
    """Search these KBs with this query (a new round)."""

    run: Run
    query: str
    kbs: list[str]
    why: str = ""


class EvidenceEvent(Event):
    """One round's evidence, to be checked."""

    run: Run
    query: str
    kbs: list[str]
    evidence: list[Evidence]


class AnswerEvent(Event):
    """The evidence is sufficient; write the answer from it."""

    run: Run
    evidence: list[Evidence]
    relevant_ids: list[str]


class RefuseEvent(Event):
    """Say plainly that the knowledge bases don't contain the answer."""

    run: Run
    reason: str


# --- the workflow -----------------------------------------------------------------------------


class AnswerWorkflow(Workflow):
    def __init__(self, engine: AnswerEngine, **kwargs):
        super().__init__(**kwargs)
        self.engine = engine

    @step
    async def prepare(self, ev: AskEvent) -> QueryEvent | StopEvent:
        run = ev.run
        engine = self.engine
        started = time.perf_counter()
        run.candidates = engine.candidate_kbs(run.targets, run.pinned_kb)
        if not run.candidates:
            run.standalone = run.question
            return StopEvent(result=engine.refusal(run, messages.no_knowledge_base(run.language)))
        run.preferred = [] if run.pinned_kb else [kb for kb in run.preferred if kb in run.candidates]
        run.standalone = engine.condense(run)
        run.timed("condense", started)
        return QueryEvent(run=run)

    @step
    async def route(self, ev: QueryEvent) -> EvidenceEvent:
        run = ev.run
        started = time.perf_counter()
        # The channel's own KBs are probed first; others only if they cannot answer (a later round).
        first = run.preferred or run.candidates
        run.status(f"Searching {', '.join(first)}…")
        probes = self.engine.probe(run, run.standalone, first)
        if not run.pinned_kb and len(probes) > 1:
            probes = self.engine.with_thread_scores(run, probes)
        if run.pinned_kb:
            chosen, method = [run.pinned_kb], "pinned"
        else:
            chosen, method = self.engine.choose(run, probes)
        run.route = Route(chosen, {kb: float(p.score) for kb, p in run.probes.items()}, method)
        evidence = merge_evidence([probes[kb].result for kb in chosen if kb in probes])
        run.tried.add((run.standalone, tuple(sorted(chosen))))
        run.timed("route", started)
        return EvidenceEvent(run=run, query=run.standalone, kbs=chosen, evidence=evidence)

    @step
    async def retrieve(self, ev: RetrieveEvent) -> EvidenceEvent:
        run = ev.run
        started = time.perf_counter()
        run.status(f"Searching {', '.join(ev.kbs)} again ({ev.why})…" if ev.why else f"Searching {', '.join(ev.kbs)}…")
        probes = self.engine.probe(run, ev.query, ev.kbs)
        evidence = merge_evidence([probes[kb].result for kb in ev.kbs if kb in probes])
        run.tried.add((ev.query, tuple(sorted(ev.kbs))))
        run.timed("retrieve", started)
        return EvidenceEvent(run=run, query=ev.query, kbs=ev.kbs, evidence=evidence)

    @step
    async def grade(self, ev: EvidenceEvent) -> AnswerEvent | RetrieveEvent | RefuseEvent:
        run = ev.run
        started = time.perf_counter()
        for kb in ev.kbs:
            if kb not in run.searched:
                run.searched.append(kb)
        verdict, policy = self.engine.grade(run, ev.evidence, ev.kbs)
        run.rounds.append(
            RoundTrace(
                query=ev.query,
                kbs=list(ev.kbs),
                sufficient=verdict.sufficient,
                reason=verdict.reason,
                top_scores={e.chunk_id: round(e.score, 4) for e in ev.evidence[:3]},
                evidence_ids=[e.chunk_id for e in ev.evidence],
                policy=policy,
            )
        )
        run.timed("grade", started)
        if verdict.sufficient:
            return AnswerEvent(run=run, evidence=ev.evidence, relevant_ids=list(verdict.relevant_ids))
        if len(run.rounds) >= MAX_ROUNDS:
            return RefuseEvent(run=run, reason=verdict.reason)
        next_round = self.engine.reformulate(run, ev.query, ev.kbs, verdict)
        if next_round is None:
            return RefuseEvent(run=run, reason=verdict.reason)
        return next_round

    @step
    async def answer(self, ev: AnswerEvent) -> StopEvent | RefuseEvent:
        run = ev.run
        started = time.perf_counter()
        run.status("Writing the answer…")
        draft = self.engine.write_answer(run, ev.evidence, ev.relevant_ids)
        run.timed("answer", started)
        if draft is None:
            return RefuseEvent(run=run, reason="no statement in the evidence could be cited")
        return StopEvent(result=self.engine.answered(run, draft))

    @step
    async def refuse(self, ev: RefuseEvent) -> StopEvent:
        run = ev.run
        text = messages.insufficient_context(run.language, run.searched or run.route.kbs, ev.reason)
        return StopEvent(result=self.engine.refusal(run, text))


def merge_evidence(results: Sequence[SearchResult]) -> list[Evidence]:
    merged = [e for r in results for e in r.evidence]
    merged.sort(key=lambda e: e.score, reverse=True)
    return merged[:EVIDENCE_TOTAL]


# --- the engine: policies behind the steps ----------------------------------------------------


class AnswerEngine:
    def __init__(self, service: KnowledgeService, settings: Settings | None = None, llm: LlmClient | None = None):
        """`settings` configure the LLM; without them (or without a key) the engine is offline."""
        self.service = service
        self.settings = settings
        if llm is None and settings is not None and settings.llm_enabled:
            llm = LlmClient(settings)
        self.llm = llm
        self.searcher = HybridSearcher(service.store, service.embedder)
        self._descriptions: dict[str, tuple[str, np.ndarray]] = {}
        self._lock = threading.Lock()
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
    ) -> Answer:
        """Answer one question from the KBs `kbs` (searching `preferred` first), or only `kb`. Who may
        use which KB is decided above this layer (bot.core); `kbs=None` means every KB in the store.
        Raises EmptyQuestion for a question with no words; never anything else for bad input."""
        return asyncio.run(self.aanswer(question, history, kb, kbs=kbs, preferred=preferred, on_status=on_status))

    async def aanswer(
        self,
        question: str,
        history: Sequence[Turn] = (),
        kb: str | None = None,
        *,
        kbs: Sequence[KbTarget] | None = None,
        preferred: Sequence[str] = (),
        on_status: Callable[[str], None] | None = None,
    ) -> Answer:
        if kbs is None:
            if kb is not None:
                self.service.store.require_kb(kb)  # a clear error for an unknown KB
            kbs = [KbTarget(r.name, r.description) for r in self.service.store.registry.list_kbs()]
        run = Run(
            question="", history=list(history), pinned_kb=kb, targets={t.name: t for t in kbs},
            preferred=list(preferred), on_status=on_status,
        )
        run.question = self._clean_question(question, run)
        run.language = messages.language_of(run.question)
        answer: Answer = await self._workflow.run(start_event=AskEvent(run=run))
        return answer

    def standalone_query(self, question: str, history: Sequence[Turn]) -> str:
        """The condense step on its own: the follow-up as a question that stands alone."""
        run = Run(question="", history=list(history), pinned_kb=None, targets={}, preferred=[], on_status=None)
        run.question = self._clean_question(question, run)
        return self.condense(run)

    # --- prepare -----------------------------------------------------------------------------

    def _clean_question(self, question: str, run: Run) -> str:
        text = " ".join((question or "").split())
        if not text or not any(ch.isalnum() for ch in text):
            raise EmptyQuestion("the question is empty: ask me something about your documents")
        if len(text) > MAX_QUESTION_CHARS:
            text = text[:MAX_QUESTION_CHARS].rsplit(" ", 1)[0]
            run.notes.append(messages.truncated_note(MAX_QUESTION_CHARS))
        return text

    def candidate_kbs(self, targets: Mapping[str, KbTarget], pinned: str | None) -> list[str]:
        """The KBs worth searching: those that may be used and hold live documents (or only the pinned one)."""
        if pinned is not None:
            return [pinned] if pinned in targets else []
        return [kb for kb in sorted(targets) if self.service.store.live_versions(kb)]

    def condense(self, run: Run) -> str:
        history = list(run.history)
        if not history:
            return run.question
        if self.llm is not None and not run.llm_down:
            try:
                result = self.llm.structured(condense.condense_messages(run.question, history), condense.CondensedQuery)
                query = " ".join(result.standalone_query.split())
                # A rewrite must be about the conversation: one that shares no term with it (a small
                # model answered "standalone_querry") would derail every later step.
                said = content_terms(" ".join([run.question, *(t.text for t in history[-condense.MAX_HISTORY_TURNS :])]))
                if query and len(query) <= 4 * max(len(run.question), 200) and content_terms(query) & said:
                    run.used_llm = True
                    return query
                run.notes.append("LLM condense output unusable: offline condense used")
            except LlmUnavailable as exc:
                self._llm_failed(run, f"LLM unavailable for condense ({exc}): offline condense used", exc)
        return condense.condense_offline(run.question, history, self.word_similarity)

    def word_similarity(self, a: list[str], b: list[str]) -> np.ndarray:
        embedder = self.service.embedder
        left = np.stack([embedder.embed_query(w) for w in a])
        right = np.stack([embedder.embed_query(w) for w in b])
        return left @ right.T

    @staticmethod
    def _llm_failed(run: Run, note: str, exc: LlmUnavailable) -> None:
        """Note a step's fallback. A server that is down, hung, rate-limiting past the retry budget or
        refusing the key stays so for the seconds a question takes: the remaining steps skip it
        instead of each waiting out the same retries (a hung server cost ~23 s per question with
        a 1 s timeout, ~90 s with the default 30 s). Garbage output does not trip this."""
        if isinstance(exc.__cause__, openai.OpenAIError):
            run.llm_down = True
            note += "; the LLM is skipped for the rest of this question"
        run.notes.append(note)

    # --- route / retrieve --------------------------------------------------------------------

    def description_vector(self, target: KbTarget | None) -> np.ndarray | None:
        if target is None or not target.description:
            return None
        kb = target.name
        cached = self._descriptions.get(kb)
        if cached is None or cached[0] != target.description:
            vector = self.service.embedder.embed_query(f"{kb}: {target.description}")
            cached = (target.description, vector)
            with self._lock:
                self._descriptions[kb] = cached
        return cached[1]

    def probe(self, run: Run, query: str, kbs: Sequence[str]) -> dict[str, routing.KbProbe]:
        embedder = self.service.embedder
        query_vector = embedder.embed_query(query)
        # A later round's rephrasing is judged by the question it must answer (see grade).
        judge_vector = embedder.embed_query(run.standalone) if query != run.standalone and run.rounds else None
        names = identifiers(query)
        probes = {}
        for kb in kbs:
            result = self.searcher.search(query, kb, k=EVIDENCE_PER_KB, query_vector=query_vector, judge_vector=judge_vector)
            description = self.description_vector(run.targets.get(kb))
            similarity = float(np.dot(query_vector, description)) if description is not None else 0.0
            exact = bool(names) and any(grading.names_all(e, names) for e in result.evidence)
            probes[kb] = routing.KbProbe(kb, result, similarity, names_identifiers=exact)
            if query == run.standalone:
                run.probes[kb] = probes[kb]
        return probes

    def with_thread_scores(self, run: Run, probes: dict[str, routing.KbProbe]) -> dict[str, routing.KbProbe]:
        """The probes, each KB credited with how well it matched the thread's earlier questions and answers."""
        totals = dict.fromkeys(probes, 0.0)
        for role in ("user", "assistant"):
            turns = [t.text for t in run.history if t.role == role]
            turns = [t for t in turns if t.strip() and not messages.is_fixed_reply(t)][-routing.THREAD_TURNS :]
            for text in turns:
                for kb, probe in self.probe(run, text, list(probes)).items():
                    totals[kb] += probe.evidence_score / len(turns)
        if not any(totals.values()):
            return probes
        credited = {kb: replace(p, thread_score=totals[kb]) for kb, p in probes.items()}
        run.probes.update(credited)
        return credited

    def choose(self, run: Run, probes: dict[str, routing.KbProbe]) -> tuple[list[str], str]:
        offline = routing.choose_kbs(list(probes.values()))
        if self.llm is None or run.llm_down or len(probes) < 2:
            return offline, "offline"
        descriptions = {kb: t.description for kb, t in run.targets.items()}
        try:
            choice = self.llm.structured(
                routing.route_messages(run.standalone, list(probes.values()), descriptions), routing.RouteChoice
            )
        except LlmUnavailable as exc:
            self._llm_failed(run, f"LLM unavailable for routing ({exc}): offline routing used", exc)
            return offline, "offline"
        chosen = [kb for kb in dict.fromkeys(choice.kbs) if kb in probes][:2]
        if not chosen:
            run.notes.append("LLM routing named no searchable knowledge base: offline routing used")
            return offline, "offline"
        run.used_llm = True
        return chosen, "llm"

    # --- grade / reformulate -----------------------------------------------------------------

    def term_known(self, kbs: Sequence[str]) -> Callable[[str], bool]:
        indexes = [self.service.store.keyword_index(kb) for kb in kbs]
        return lambda term: any(index.knows(term) for index in indexes)

    def grade(self, run: Run, evidence: list[Evidence], kbs: Sequence[str]) -> tuple[grading.Verdict, str]:
        # Always judged against the standalone query (cosine and coverage): a reformulation may find
        # new evidence, never lower the bar.
        known = self.term_known(kbs)
        # CJK bigrams that straddle two words never occur in any text; count only those the KB knows.
        query_terms = {t for t in content_terms(run.standalone) if not has_cjk(t) or known(t)}
        for e in evidence:
            e.coverage = len(query_terms & content_terms(f"{e.chunk.header}\n{e.chunk.text}")) / max(len(query_terms), 1)
        offline = grading.grade_offline(run.standalone, evidence, known)
        if self.llm is None or run.llm_down or not evidence:
            return offline, "offline"
        if not offline.sufficient and "never mentions" in offline.reason:
            return offline, "offline"  # a missing name is a fact, not a judgement call
        # Evidence too weak for any offline rule is not worth a call; whatever an offline rule accepted,
        # the LLM reads.
        if not offline.sufficient and max(e.cosine for e in evidence) < grading.MIN_COSINE:
            return offline, "offline"
        try:
            verdict = self.llm.structured(grading.grade_messages(run.standalone, evidence), grading.GradeVerdict)
        except LlmUnavailable as exc:
            self._llm_failed(run, f"LLM unavailable for grading ({exc}): offline check used", exc)
            return offline, "offline"
        ids = {f"E{i + 1}": e.chunk_id for i, e in enumerate(evidence)}
        relevant = tuple(ids[r] for r in verdict.relevant_ids if r in ids)
        run.used_llm = True
        if verdict.sufficient and not relevant:  # "sufficient", but citing no passage it was shown
            reason = "the LLM named no valid passage as relevant"
        else:
            reason = "the evidence answers the question" if verdict.sufficient else f"missing: {verdict.missing or 'unspecified'}"
        return grading.Verdict(verdict.sufficient and bool(relevant), reason, relevant, verdict.missing), "llm"

    def reformulate(self, run: Run, query: str, kbs: list[str], verdict: grading.Verdict) -> RetrieveEvent | None:
        """The next round: widen to KBs not yet searched, or rephrase the query; never repeat a round."""
        others = [kb for kb in run.candidates if kb not in run.searched]
        if self.llm is not None and not run.llm_down:
            try:
                rewrite = self.llm.structured(
                    condense.condense_messages(
                        f"{run.standalone}\n(The previous search for '{query}' missed: {verdict.missing or verdict.reason}. "
                        "Rewrite the search query to find it.)",
                        run.history,
                    ),
                    condense.CondensedQuery,
                )
                candidate = " ".join(rewrite.standalone_query.split())
                target = kbs if not others else kbs + others
                if candidate and (candidate, tuple(sorted(target))) not in run.tried:
                    run.used_llm = True
                    return RetrieveEvent(run=run, query=candidate, kbs=target, why="rephrased")
            except LlmUnavailable as exc:
                self._llm_failed(run, f"LLM unavailable for reformulation ({exc}): offline reformulation used", exc)
        for candidate, target, why in self._offline_reformulations(run, query, kbs, others):
            if candidate and target and (candidate, tuple(sorted(target))) not in run.tried:
                return RetrieveEvent(run=run, query=candidate, kbs=target, why=why)
        return None

    def _offline_reformulations(self, run: Run, query: str, kbs: list[str], others: list[str]):
        keywords = " ".join(condense.content_words(run.standalone))
        # 1. The channel narrowed the first round: the channel's KBs could not answer, try the others.
        if run.preferred and others:
            yield run.standalone, others, "other knowledge bases"
        # 2. Keywords only, on the KBs the router chose: chatty questions dilute both scores.
        yield keywords, list(run.route.kbs), "keywords only"
        # 3. Widen: every KB the question may use.
        yield keywords, list(run.candidates), "all knowledge bases"

    # --- answer ------------------------------------------------------------------------------

    def write_answer(self, run: Run, evidence: list[Evidence], relevant_ids: list[str]) -> answering.DraftAnswer | None:
        chosen = answering.select_evidence(evidence, relevant_ids)
        if self.llm is not None and not run.llm_down:
            try:
                text = self.llm.complete(answering.answer_messages(run.standalone, chosen))
                draft = answering.validate_llm_answer(text, chosen)
                if draft is not None:
                    run.used_llm = True
                    return draft
                run.notes.append("the LLM's answer had no valid citation: extractive answer used")
            except LlmUnavailable as exc:
                self._llm_failed(run, f"LLM unavailable for the answer ({exc}): extractive answer used", exc)
        embedder = self.service.embedder
        # A follow-up's own words ("contractors") are what it asks about; the words carried over
        # from the conversation only place it.
        focus = content_terms(run.question) if run.standalone != run.question else set()
        saved = self.service.store.unit_vectors(embedder.model_name, embedder.dimension, [e.chunk for e in chosen])
        return answering.extractive_answer(
            run.standalone,
            chosen,
            embedder.embed_query(run.standalone),
            self.embed_sentences,
            focus=focus,
            unit_vectors=saved,
            asked=run.question,
        )

    def embed_sentences(self, texts: list[str]) -> np.ndarray:
        """Evidence sentences with no vector saved at ingest (chunks embedded by a backend that cannot
        pool sentence spans). With the local model each is encoded like a query — on one torch thread
        and cached: a batch on two threads took 1.4-2.2 s for 8 sentences on the shared 2-core machine
        (vs 0.25 s on one), and the same evidence sentences come back question after question."""
        embedder = self.service.embedder
        if self.service.settings.embedding_backend != "local" or not texts:
            return embedder.embed_documents(texts)
        return np.stack([embedder.embed_query(t) for t in texts])

    def _finish(self, run: Run, status: str, text: str, citations: list[Citation]) -> Answer:
        run.timings["total"] = round((time.perf_counter() - run.started) * 1000, 2)
        return Answer(
            status=status,  # type: ignore[arg-type]
            answer=text,
            question=run.question,
            standalone_query=run.standalone,
            route=run.route,
            rounds=run.rounds,
            citations=citations,
            timings_ms=run.timings,
            mode="llm" if run.used_llm else "offline",
            language=run.language,
            notes=run.notes,
            searched_kbs=run.searched,
        )

    def answered(self, run: Run, draft: answering.DraftAnswer) -> Answer:
        return self._finish(run, "answered", draft.text, draft.citations)

    def refusal(self, run: Run, text: str) -> Answer:
        return self._finish(run, "insufficient_context", text, [])


__all__ = ["AnswerEngine", "EmptyQuestion", "keyword_terms"]
