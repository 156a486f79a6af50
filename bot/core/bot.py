"""The application layer's one façade: every surface (Slack, console, CLI, eval) does everything through it.

Each call takes one snapshot of the KBs and their access rules (the registry, refreshed from the kb.toml
files when they change), decides what the origin may do with `permissions`, and hands the work to the
engine or the knowledge service. No surface reads the store, and no access rule lives anywhere else.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.agent.models import Answer, KbTarget, Turn
from bot.config import Settings
from bot.core import permissions
from bot.core.channel_setup import ChannelSetup
from bot.core.errors import AccessDenied, NotAllowedHere, NotFound
from bot.core.gaps import DEFAULT_DAYS, FEEDBACK_REASONS, MAX_DAYS, GapsReport, clean_comment, merge_gaps
from bot.core.models import AskResult, ChannelKb, ChannelView, Citation, DocView, HomeView, IngestReport, KbView, Upload
from bot.core.origin import Origin, Surface
from bot.core.permissions import MembershipLookup
from bot.core.records import Records
from bot.core.traces import AnswerTrace, BrokenRecord
from bot.core.trust import annotate
from tools.embeddings import Embedder
from tools.manifests import KnowledgeBaseManifest
from tools.search import Evidence
from tools.service import DocumentNotFound, KbEntry, KbSummary, KnowledgeService
from tools.store import KnowledgeBaseError

if TYPE_CHECKING:
    from bot.agent.engine import AnswerEngine

log = logging.getLogger(__name__)

DECLARATIONS_CHECK_S = 2.0
MEMBERSHIP_UNKNOWN = (
    "Your channel memberships could not be checked just now, so knowledge bases restricted to some channels "
    "are not shown. Try again in a minute."
)
GAPS_SHOWN = 20


class KnowledgeBot:
    def __init__(
        self,
        settings: Settings,
        *,
        membership: MembershipLookup | None = None,
        service: KnowledgeService | None = None,
        wrap_embedder: Callable[[Embedder], Embedder] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.settings = settings
        self.service = service or KnowledgeService(settings.tools, wrap_embedder=wrap_embedder)
        self.membership = membership
        self.admins = frozenset(settings.admin_user_ids)
        self.clock = clock  # wall time, for how old a cited document is
        self.records = Records(settings.data_dir.expanduser() / "records.sqlite3")  # opened on first use
        self.channel_setup = ChannelSetup(settings.data_dir.expanduser() / "records.sqlite3")
        self._engine: AnswerEngine | None = None
        self._engine_lock = threading.Lock()
        self._signature: tuple | None = None
        self._signature_checked = -DECLARATIONS_CHECK_S
        self._refresh_lock = threading.Lock()
        self.reads_declarations = True  # False in an answering process: it reads the rules the registry holds

    def close(self) -> None:
        self.records.close()
        self.channel_setup.close()
        self.service.close()

    def __enter__(self) -> KnowledgeBot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def engine(self) -> AnswerEngine:
        """Built on first use: it loads the embedding model (seconds), so a server can listen before."""
        if self._engine is None:
            with self._engine_lock:
                if self._engine is None:
                    from bot.agent.engine import AnswerEngine  # llama-index, numpy: loaded when first needed

                    self._engine = AnswerEngine(self.service, self.settings)
        return self._engine

    @property
    def mode(self) -> str:
        return "llm" if self.settings.llm_enabled else "offline"

    @property
    def embedder(self) -> Embedder:
        return self.service.embedder

    def open_store(self) -> None:
        """Take the store now (an embedded one is owned by one process: raises KnowledgeBaseError, naming
        the way out, if another process holds it) instead of at the first question."""
        self.service.store.open()

    def warm_up(self) -> None:
        """Load the model and the indexes before the first question arrives — and the Chinese word
        segmenter: loaded by the first question in Chinese, it would stall every question in flight."""
        self.ask(Origin.cli(), "warm-up: what is in the knowledge base?")
        self.ask(Origin.cli(), "预热：知识库里有什么？")

    def prefetch_texts(self) -> int:
        """Read the chunk texts of the (small enough) KBs into the searcher's snapshots; the number read."""
        total = 0
        for name, entry in self._snapshot().items():
            if entry.exists and not entry.model_problem:
                total += self.engine.searcher.prefetch_texts(name)
        return total

    def warm_up_ingest(self) -> None:
        """Load the chunker now: llama-index's sentence splitter imports NLTK (and through it SciPy) on its
        first split — seconds of CPU, paid by the first document a process publishes."""
        from tools.chunking import chunk_document
        from tools.parsing import ParsedDocument, Section

        # Longer than a chunk, so the splitter reaches its sentence tokenizer.
        text = " ".join(f"Sentence {n} warms the chunker up." for n in range(200))
        chunk_document(ParsedDocument("warm-up", [Section(text, "warm-up")]), str.split)

    # --- the snapshot ----------------------------------------------------------------------------

    def refresh(self) -> list[str]:
        """Read the kb.toml files into the registry now; the problems found (also logged)."""
        problems = self.service.refresh_manifests()
        for problem in problems:
            log.warning("knowledge base declaration: %s (its last known access rules stay in force)", problem)
        return problems

    def _snapshot(self) -> dict[str, KbEntry]:
        """The KBs and the rules in force, once per call; declarations are re-read when a kb.toml changed
        (looked at every few seconds, not on every call: a listener thread may be waiting)."""
        self.refresh_if_changed()
        return self.service.catalog()

    def refresh_if_changed(self) -> None:
        """Read the kb.toml files into the registry if one changed (looked at every few seconds). An answering
        process (bot/core/answer_processes.py) never does: the serving process does it before handing a
        question over, so there is one writer of the rules and the answering process reads them from the registry."""
        if not self.reads_declarations:
            return
        with self._refresh_lock:  # one reader of the files at a time: an older read never lands after a newer one
            now = time.monotonic()
            if now - self._signature_checked >= DECLARATIONS_CHECK_S:
                self._signature_checked = now
                signature = self.service.declarations_signature()
                if signature != self._signature:
                    self.refresh()
                    self._signature = signature

    def _member_of(self, origin: Origin, entries: dict[str, KbEntry]) -> frozenset[str]:
        return self._memberships(origin, entries)[0]

    def _memberships(self, origin: Origin, entries: dict[str, KbEntry]) -> tuple[frozenset[str], str | None]:
        """The restricted KBs' channels this person is in, and why none are known when the lookup failed."""
        if not origin.private or not origin.user or self.membership is None:
            return frozenset(), None
        channels = permissions.restricted_channels(entries)
        if not channels:
            return frozenset(), None
        try:
            return self.membership.channels_of(origin.user, channels), None
        except Exception as exc:  # fail closed: no restricted KB in this DM
            log.warning("channel membership of %s could not be checked (%s); restricted KBs skipped", origin.user, exc)
            return frozenset(), MEMBERSHIP_UNKNOWN

    def _readable(
        self, origin: Origin, entries: dict[str, KbEntry], member_of: frozenset[str] | None = None
    ) -> list[str]:
        if member_of is None:
            member_of = self._member_of(origin, entries)
        return [name for name, e in entries.items() if permissions.may_read(origin, e, member_of)]

    def _searched_first(self, origin: Origin, entries: dict[str, KbEntry], readable: Iterable[str]) -> list[str]:
        """The origin's channel's own KBs (in the assistant pane: the channel the user is looking at) — kb.toml's,
        as changed with `/kb channel` — only those it may read: a channel in view never adds a KB, it only says
        which to search first."""
        readable = set(readable)
        changed_here = self._changes_in(permissions.search_channel(origin))
        return [name for name in permissions.searched_first(origin, entries, changed_here) if name in readable]

    def _entry_to_change(self, origin: Origin, kb: str) -> KbEntry:
        """The KB, if this origin may change it. A KB it may not even see is reported as not existing."""
        entries = self._snapshot()
        entry = entries.get(kb)
        if entry is not None and permissions.may_change(origin, entry, self.admins):
            return entry
        if entry is None or kb not in self._readable(origin, entries):
            raise NotFound(self._no_such_kb(origin, kb, entries))
        uploaders = entry.manifest.uploaders if entry.manifest else ()
        raise AccessDenied(f"only the uploaders of {kb!r} can add or delete its documents", uploaders)

    def _no_such_kb(self, origin: Origin, kb: str, entries: dict[str, KbEntry]) -> str:
        known = ", ".join(self._readable(origin, entries)) or "none"
        return f"no knowledge base named {kb!r} ({'known' if origin.trusted else 'known here'}: {known})"

    # --- reading -------------------------------------------------------------------------------

    def ask(
        self,
        origin: Origin,
        question: str,
        history: Sequence[Turn] = (),
        kb: str | None = None,
        on_status: Callable[[str], None] | None = None,
        silent_refusals: bool = False,
    ) -> AskResult:
        """Answer from the KBs this origin may read (its channel's own first), record it where answers are
        recorded. Raises EmptyQuestion for a question with no words. With `silent_refusals` (the surface shows
        only answers, e.g. auto-reply) a refusal is not recorded: nobody saw it."""
        entries = self._snapshot()
        readable = self._readable(origin, entries)
        if kb is not None and kb not in readable and origin.trusted:
            raise NotFound(self._no_such_kb(origin, kb, entries))
        targets, notes = [], []
        for name in readable:
            entry = entries[name]
            if not entry.exists:
                continue
            if entry.model_problem:
                notes.append(f"{name} was not searched: {entry.model_problem}")
                continue
            targets.append(KbTarget(name, entry.description))
        first = self._searched_first(origin, entries, readable)
        answer = self.engine.answer(
            question,
            history,
            kb,
            kbs=targets,
            preferred=first,
            on_status=on_status,
            deadline=self.settings.question_deadline_s,
        )
        answer.notes.extend(notes)
        self._add_trust_signals(answer)
        shown = answer.status == "answered" or not silent_refusals
        answer_id = self.records.log_answer(origin, answer) if origin.recorded and shown else None
        return AskResult(answer, answer_id)

    def _add_trust_signals(self, answer: Answer) -> None:
        """When each cited document was last updated, who uploaded it, whether it is old (bot.core.trust)."""
        try:
            cited: dict[str, set[str]] = {}
            for citation in answer.citations:
                cited.setdefault(citation.kb, set()).add(citation.document)
            # only the cited documents (docs/benchmarks.md, Scale: all of a large KB per answer cost seconds)
            documents_of = lambda kb: self.service.documents(kb, cited.get(kb, ()))  # noqa: E731
            annotate(answer.citations, documents_of, self.clock(), self.settings.stale_after_days)
        except Exception as exc:  # the answer still goes out, without the signals; the log says why
            log.warning("trust signals of the citations could not be read: %s", exc)

    def standalone_query(self, question: str, history: Sequence[Turn]) -> str:
        """The follow-up rewritten as a question that stands alone (what `ask` searches with)."""
        return self.engine.standalone_query(question, history)

    def search(self, origin: Origin, kb: str, query: str, k: int = 10) -> list[Evidence]:
        """The hybrid search the engine uses, on one KB (the retrieval benchmark measures it)."""
        entries = self._snapshot()
        if kb not in self._readable(origin, entries):
            raise NotFound(self._no_such_kb(origin, kb, entries))
        return self.engine.searcher.search(query, kb, k=k).evidence

    def cited_texts(self, origin: Origin, citations: Sequence[Citation]) -> list[str]:
        """The full text of each cited chunk that is still live (citations carry only an excerpt)."""
        readable = set(self._readable(origin, self._snapshot()))
        texts = []
        for kb in dict.fromkeys(c.kb for c in citations if c.kb in readable):
            chunks = self.service.store.get_chunks(kb, [c.chunk_id for c in citations if c.kb == kb])
            texts += [c.text for c in chunks]
        return texts

    def embedded_texts(self, origin: Origin, kb: str) -> list[str]:
        """Exactly the texts ingest embedded for a KB's live chunks (the ingest benchmark encodes them bare)."""
        self._entry_to_change(origin, kb)
        return [f"{c.header}\n{c.text}" for c in self.service.store.live_chunks(kb)]

    @staticmethod
    def pipeline_identity(settings: Settings) -> tuple[str, ...]:
        """Changes whenever what ingest makes of a text changes (benchmark KBs are rebuilt then): the
        chunker's code, the pipeline version and the configured chunk window."""
        import inspect

        from tools import chunking
        from tools.ingest import PIPELINE_VERSION, chunk_window_for

        return inspect.getsource(chunking), PIPELINE_VERSION.decode(), chunk_window_for(settings.tools).identity

    @staticmethod
    def forget_query_vectors() -> None:
        """Drop cached query embeddings (a latency benchmark then pays for encoding its queries)."""
        from tools.embeddings import clear_query_cache

        clear_query_cache()

    def visible_kbs(self, origin: Origin) -> list[KbView]:
        """The KBs this origin may read (for /kb list and the console), with their documents."""
        entries = self._snapshot()
        return self._kb_views(origin, entries, self._readable(origin, entries))

    def _kb_views(self, origin: Origin, entries: dict[str, KbEntry], readable: Sequence[str]) -> list[KbView]:
        changes = self._changes_by_kb()
        views = []
        for name in readable:
            entry = entries[name]
            may_upload = permissions.may_change(origin, entry, self.admins)
            # "Last updated" is when the live content was published, as in the Sources of an answer.
            documents = tuple(
                DocView(
                    d.name,
                    d.state,
                    d.live_chunks if d.live_version else 0,
                    d.error,
                    d.source_url,
                    d.published_at if d.live_version is not None else d.updated_at,
                )
                for d in (self.service.documents(name) if entry.exists else [])
            )
            # A broken declaration is news for the people who can fix it; everyone is told a KB is not searched.
            note = entry.model_problem or (entry.problem if may_upload or origin.trusted else None)
            manifest = entry.manifest
            views.append(
                KbView(
                    name,
                    entry.description,
                    bool(manifest and manifest.restricted),
                    may_upload,
                    documents,
                    permissions.first_channels(entry, changes.get(name)),
                    note,
                )
            )
        return views

    def searched_first(self, origin: Origin) -> list[str]:
        """The KBs this origin's channel searches first, among those it may read (the assistant pane's
        suggested prompts start with them)."""
        entries = self._snapshot()
        return self._searched_first(origin, entries, self._readable(origin, entries))

    # --- knowledge gaps and App Home -------------------------------------------------------------

    def knowledge_gaps(
        self, origin: Origin, days: int = DEFAULT_DAYS, kb: str | None = None, limit: int = GAPS_SHOWN
    ) -> GapsReport:
        """The most frequent refused and 👎 questions of the last `days` days, of the KBs whose gaps this
        origin may see (`kb`: of that one only; NotFound when it may not see it)."""
        if not 1 <= days <= MAX_DAYS:
            raise KnowledgeBaseError(f"days must be between 1 and {MAX_DAYS}, not {days}")
        entries = self._snapshot()
        member_of = self._member_of(origin, entries)
        return self._gaps(origin, entries, member_of, days, kb, limit)

    def _gaps(
        self,
        origin: Origin,
        entries: dict[str, KbEntry],
        member_of: frozenset[str],
        days: int,
        kb: str | None,
        limit: int,
    ) -> GapsReport:
        readable = self._readable(origin, entries, member_of)
        mine = [n for n in readable if permissions.may_see_gaps(origin, entries[n], self.admins, member_of)]
        if kb is not None:
            if kb not in mine:
                if kb in readable:
                    uploaders = entries[kb].manifest.uploaders if entries[kb].manifest else ()
                    raise AccessDenied(f"only the uploaders of {kb!r} and admins can see its knowledge gaps", uploaders)
                raise NotFound(self._no_such_kb(origin, kb, entries))
            mine = [kb]
        since = time.time() - days * 86400
        gaps, total = merge_gaps(
            self.records.gap_rows(mine, since),
            self.records.gap_comments(mine, since),
            lambda scope: permissions.may_see_gap_of(scope, readable),
            mine,
            limit,
        )
        return GapsReport(days, since, tuple(mine), tuple(gaps), total)

    def home(self, origin: Origin, days: int = DEFAULT_DAYS, limit: int = GAPS_SHOWN) -> HomeView:
        """App Home for one person: the KBs they may read; for the KBs they may change, the knowledge gaps."""
        entries = self._snapshot()
        member_of, note = self._memberships(origin, entries)
        readable = self._readable(origin, entries, member_of)
        views = self._kb_views(origin, entries, readable)
        mine = any(permissions.may_see_gaps(origin, entries[n], self.admins, member_of) for n in readable)
        gaps = self._gaps(origin, entries, member_of, days, None, limit) if mine else None
        return HomeView(tuple(views), gaps, note)

    def summaries(self, origin: Origin) -> list[KbSummary]:
        """Document and chunk counts per KB (`kbbot kb list`); works while another process owns the store."""
        entries = self._snapshot()
        readable = set(self._readable(origin, entries))
        changes = self._changes_by_kb()
        return [
            dataclasses.replace(s, channels=permissions.first_channels(entries[s.name], changes.get(s.name)))
            if s.name in entries
            else s
            for s in self.service.summaries()
            if s.name in readable
        ]

    def answered_in(self, channel: str, thread_ts: str) -> bool:
        """Whether an answer of this bot was recorded in that Slack thread."""
        return self.records.answered_in(channel, thread_ts)

    def answer_record(self, answer_id: str) -> dict | None:
        return self.records.find_answer(answer_id)

    def trace(self, origin: Origin, answer_id: str) -> AnswerTrace:
        """How a recorded answer was found, from its stored record, for someone who may see it here
        (`permissions.may_see_trace`). NotFound when there is no readable record of it; AccessDenied
        when it names a KB this origin may not read here (or was given privately to someone else)."""
        record = self.records.find_answer(answer_id)
        if record is None:
            raise NotFound(f"no recorded answer {answer_id!r}")
        try:
            trace = AnswerTrace.from_record(record)
        except BrokenRecord as exc:
            log.warning("%s", exc)
            raise NotFound(f"the record of answer {answer_id!r} cannot be read") from None
        entries = self._snapshot()
        if not permissions.may_see_trace(origin, trace.asked_in, trace.kbs, entries, self._member_of(origin, entries)):
            raise AccessDenied("this answer drew on knowledge this origin may not read")
        return trace

    def record_feedback(
        self, origin: Origin, answer_id: str, value: str, message_ts: str | None = None, reason: str | None = None
    ) -> None:
        self.records.log_feedback(answer_id, value, origin, message_ts, reason)

    # --- channels set up from Slack ----------------------------------------------------------

    def _changes_in(self, channel: str | None) -> dict[str, bool]:
        """KB → searched first, as changed from Slack in this channel. Unreadable: the kb.toml defaults (which
        KBs come first is a preference; who may read them is decided elsewhere, from kb.toml alone)."""
        if channel is None:
            return {}
        try:
            return {c.kb: c.searched_first for c in self.channel_setup.changes(channel)}
        except (sqlite3.Error, OSError) as exc:
            log.warning("channel settings unreadable (%s); using the kb.toml channels", exc)
            return {}

    def _changes_by_kb(self) -> dict[str, dict[str, bool]]:
        try:
            changes = self.channel_setup.changes()
        except (sqlite3.Error, OSError) as exc:
            log.warning("channel settings unreadable (%s); using the kb.toml channels", exc)
            return {}
        by_kb: dict[str, dict[str, bool]] = {}
        for change in changes:
            by_kb.setdefault(change.kb, {})[change.channel] = change.searched_first
        return by_kb

    @staticmethod
    def _channel_of(origin: Origin) -> str:
        if origin.surface != Surface.CHANNEL or not origin.channel:
            raise AccessDenied("a channel is set up from inside that channel")
        return origin.channel

    def channel_view(self, origin: Origin) -> ChannelView:
        """Which KBs this channel searches first (only those readable here), and whether auto-reply is on."""
        channel = self._channel_of(origin)
        entries = self._snapshot()
        readable = self._readable(origin, entries)
        try:
            changes = {c.kb: c for c in self.channel_setup.changes(channel)}
        except (sqlite3.Error, OSError) as exc:
            log.warning("channel settings unreadable (%s); using the kb.toml channels", exc)
            changes = {}
        first_names = permissions.searched_first(origin, entries, {k: c.searched_first for k, c in changes.items()})
        first = tuple(
            ChannelKb(
                name,
                bool(entries[name].manifest and channel in entries[name].manifest.channels),
                changes[name].changed_by if name in changes else None,
            )
            for name in first_names
            if name in readable
        )
        shown = {kb.name for kb in first}
        return ChannelView(channel, first, tuple(n for n in readable if n not in shown), self.autoreply_in(channel))

    def set_searched_first(self, origin: Origin, kb: str, searched_first: bool) -> bool:
        """Put a KB first in (or take it out of) this channel's search: its uploaders and the admins, and only
        where its kb.toml lets it be read. False when it already was (or was not) searched first here."""
        channel = self._channel_of(origin)
        entry = self._entry_to_change(origin, kb)
        if searched_first and not permissions.may_be_searched_in(channel, entry):
            raise NotAllowedHere(
                f"{kb!r} is restricted to its allowed channels (set in its kb.toml), so it cannot be searched here"
            )
        entries = self._snapshot()
        before = kb in permissions.searched_first(origin, entries, self._changes_in(channel))
        if before == searched_first:
            return False
        try:
            self.channel_setup.set_searched_first(channel, kb, searched_first, origin.user)
        except (sqlite3.Error, OSError) as exc:
            log.error("could not store the channel setting of %s: %s", channel, exc)
            raise KnowledgeBaseError("the channel setting could not be saved") from None
        return True

    def autoreply_in(self, channel: str) -> bool:
        """Whether kbbot answers top-level questions in this channel without a mention. Unreadable: no."""
        try:
            return self.channel_setup.autoreply(channel)
        except (sqlite3.Error, OSError) as exc:
            log.warning("channel settings unreadable (%s); no auto-reply in %s", exc, channel)
            return False

    def set_autoreply(self, origin: Origin, on: bool) -> None:
        """Auto-reply on or off in this channel: kbbot's admins only."""
        channel = self._channel_of(origin)
        if not permissions.may_set_up_channels(origin, self.admins):
            raise AccessDenied("only kbbot's admins (KBBOT_ADMIN_USERS) can turn auto-reply on or off")
        try:
            self.channel_setup.set_autoreply(channel, on, origin.user)
        except (sqlite3.Error, OSError) as exc:
            log.error("could not store the channel setting of %s: %s", channel, exc)
            raise KnowledgeBaseError("the channel setting could not be saved") from None

    def record_feedback_reason(
        self,
        origin: Origin,
        answer_id: str,
        reason: str | None,
        comment: str | None = None,
        message_ts: str | None = None,
    ) -> None:
        """Why this person's 👎 on an answer: one of FEEDBACK_REASONS and/or a comment, kept with that 👎."""
        if reason is not None and reason not in FEEDBACK_REASONS:
            raise KnowledgeBaseError(f"unknown reason {reason!r} (one of: {', '.join(FEEDBACK_REASONS)})")
        if reason is None and clean_comment(comment) is None:
            return  # nothing to add: the plain 👎 stays as it was
        self.records.set_feedback_reason(answer_id, origin, reason, comment, message_ts)

    # --- changing ------------------------------------------------------------------------------

    def uploadable_kbs(self, origin: Origin) -> list[str]:
        """The KBs this origin may upload to (declared ones not created yet included)."""
        return [name for name, e in self._snapshot().items() if permissions.may_change(origin, e, self.admins)]

    def check_upload(self, origin: Origin, kb: str) -> None:
        """Raises NotFound or AccessDenied now, before anything is downloaded."""
        self._entry_to_change(origin, kb)

    def upload(self, origin: Origin, kb: str, uploads: Sequence[Upload]) -> IngestReport:
        """Add documents to a KB as one batch: a document of the same name is replaced; two uploads with one
        name are both refused (neither silently replaces the other)."""
        self._entry_to_change(origin, kb)
        return self.service.ingest_uploads(
            kb, [(u.name, u.data, u.source_url) for u in uploads], uploaded_by=None if origin.trusted else origin.user
        )

    def save_conversation(self, origin: Origin, kb: str, upload: Upload, public: bool) -> IngestReport:
        """Keep a conversation of the origin's channel (a Slack thread) as a document of `kb`, if its readers
        could read that KB there (`permissions.may_keep_conversation`); `public`: the conversation is known
        to be public."""
        entry = self._entry_to_change(origin, kb)
        if not permissions.may_keep_conversation(entry, origin.channel or "", public):
            raise NotAllowedHere(
                f"a private conversation can only be saved into a restricted knowledge base readable in that "
                f"channel alone, and {kb!r} is not one"
            )
        return self.upload(origin, kb, [upload])

    def ingest_paths(self, origin: Origin, kb: str, paths: Sequence[Path], progress: bool = False) -> IngestReport:
        self._entry_to_change(origin, kb)
        return self.service.ingest(kb, list(paths), progress=progress)

    def ingest_records(
        self, origin: Origin, kb: str, records: Iterable[tuple[str, str, str]], progress: bool = False
    ) -> IngestReport:
        """(name, title, text) records, e.g. a benchmark corpus, through the same pipeline as files."""
        self._entry_to_change(origin, kb)
        self.service.open_kb(kb)
        return self.service.ingestor.ingest_texts(kb, records, progress=progress)

    def delete_document(self, origin: Origin, kb: str, document: str) -> None:
        self._entry_to_change(origin, kb)
        try:
            self.service.delete_document(kb, document)
        except DocumentNotFound as exc:
            raise NotFound(str(exc)) from None

    def create_kb(
        self,
        origin: Origin,
        name: str,
        description: str,
        *,
        restricted: bool = False,
        allowed_channels: Sequence[str] = (),
        channels: Sequence[str] = (),
        uploaders: Sequence[str] = (),
    ) -> None:
        """A KB not declared in knowledge_bases/; its access rules are stored with it."""
        self._require_operator(origin, "create knowledge bases")
        rules = KnowledgeBaseManifest(
            name,
            description,
            channels=tuple(channels),
            visibility="restricted" if restricted else "public",
            allowed_channels=tuple(allowed_channels),
            uploaders=tuple(uploaders),
        )
        self.service.create_kb(name, description, rules)

    def delete_kb(self, origin: Origin, name: str) -> None:
        self._require_operator(origin, "delete knowledge bases")
        self.service.delete_kb(name)

    def kb_exists(self, name: str) -> bool:
        entry = self._snapshot().get(name)
        return entry is not None and entry.exists

    def sync(self, origin: Origin, progress: bool = False, keep_missing: bool = False) -> list[IngestReport]:
        self._require_operator(origin, "sync the declared knowledge bases")
        return self.service.sync(progress=progress, keep_missing=keep_missing)

    def reindex(self, origin: Origin, kb: str, progress: bool = False) -> int:
        self._require_operator(origin, "re-index knowledge bases")
        return self.service.reindex(kb, progress=progress)

    @staticmethod
    def _require_operator(origin: Origin, what: str) -> None:
        if not origin.trusted:
            raise AccessDenied(f"only the operator (the command line) can {what}")
