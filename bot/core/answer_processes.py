"""Questions answered in worker processes: the Python of many answers on more than one core.

A burst of questions is bound by the Python CPU of the answers, all under one interpreter lock
(docs/benchmarks.md, "burst"). With KBBOT_ANSWER_PROCESSES=N the serving process hands each question to
one of N answering processes, each with its own interpreter, its own KnowledgeBot and engine (and its
own copy of the embedding model), and gets back the `AskResult` to render. Everything else — Slack, the
ledger, uploads and ingests — stays in the serving process.

What an answering process may touch, and why it is sound:

- The embedded Chroma store is never opened in it. Chroma's PersistentClient is not safe for several
  processes (it caches collection segments in memory: a second process misses the first one's writes,
  and concurrent writers can lose data; chroma-core/chroma#961, #3769, #3792), and the serving process
  holds the data dir's lock (tools/store.py). Every Chroma read of an answering process — the
  collection's metadata, `get`, `query`, `count` — is a request over the pipe that the serving process
  carries out on its own client, the one its ingests write through. Any other Chroma call raises: the
  answering process is read-only. It is the same arrangement as several kbbot processes sharing a Chroma
  server (CHROMA_HOST), which the store already supports, with the serving process as the server.
- The registry (SQLite, WAL) is read directly: the KBs, their generations, live versions and rules. An
  ingest in the serving process bumps the KB's generation there; the answering process's next search
  sees it and brings its keyword index and vector snapshot up to date exactly as a second process on a
  Chroma server does (the saved files are written atomically under unique names).
- The rules are the registry's. Only the serving process reads kb.toml files into it (before each
  question it hands over), so an older read in one process can never overwrite a newer one of another.
- Permissions are decided by the same `KnowledgeBot.ask`, from the same registry; channel memberships
  (a Slack call) are asked of the serving process, and a failure there fails closed as in-process.
- Answers are recorded by the answering process into records.sqlite3 (SQLite, WAL, shared by design).

A worker that dies fails the questions it held ("try again"), and is replaced. If none can be started,
questions are answered in the serving process, as without this setting. A stopping server keeps its workers
(they ignore the Ctrl-C and SIGTERM sent to the process group) until it has drained; what is still unanswered
when it closes them stays held for the next start (`Stopping`), never answered by the unwarmed serving process.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from bot.agent.models import EmptyQuestion, Turn
from bot.config import Settings
from bot.core.models import AskResult
from bot.core.origin import Origin
from tools.store import KnowledgeBaseError, KnowledgeStore

if TYPE_CHECKING:
    from bot.core.bot import KnowledgeBot

log = logging.getLogger(__name__)

CHROMA_READS = frozenset({"get", "query", "count"})
EXTRA_WAIT_S = 30.0  # beyond the question's deadline, before a question held by a stuck worker is failed
START_TIMEOUT_S = 180.0
RESTART_DELAY_S = 1.0
SLACK_SECRETS = ("slack_bot_token", "slack_app_token", "slack_signing_secret")  # Settings fields
MAX_FAILED_STARTS = 3  # workers in a row that die before they are ready, before no more are started


class WorkerGone(KnowledgeBaseError):
    """The answering process stopped before answering (the question can be asked again)."""


class Stopping(WorkerGone):
    """kbbot is stopping: the question was not answered, and is not answered in the serving process (which
    never warmed up); a Slack question stays held and is answered at the next start."""


# --- the answering process's side --------------------------------------------------------------


class _Channel:
    """One end of a worker's pipe: requests by id, answers matched back; sends from any thread."""

    def __init__(self, conn) -> None:  # noqa: ANN001 - a multiprocessing Connection
        self.conn = conn
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future] = {}
        self._lock = threading.Lock()

    def send(self, message: tuple) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._send_lock:
            self.conn.send_bytes(data)

    def send_outcome(self, kind: str, ident: int, ok: bool, value: object) -> None:
        """What the other end asked for (an answer, a request's reply). One that cannot be sent (e.g. not
        picklable) is sent as the failure it is: the other end must not wait out its deadline for it."""
        try:
            self.send((kind, ident, ok, value))
        except Exception as exc:
            with contextlib.suppress(Exception):  # the pipe itself is gone: nobody is waiting
                self.send((kind, ident, False, RuntimeError(f"the {kind} could not be sent: {exc!r:.200}")))

    def request(self, kind: str, *args: object, timeout: float = 60.0) -> object:
        """Ask the other end and wait for its answer (raises what it raised, as KnowledgeBaseError)."""
        rid = next(self._ids)
        future: Future = Future()
        with self._lock:
            self._waiting[rid] = future
        try:
            self.send(("rpc", rid, kind, args))
            return future.result(timeout)
        except TimeoutError:
            raise KnowledgeBaseError(f"the serving process did not answer a {kind} request in {timeout:g} s") from None
        finally:
            with self._lock:
                self._waiting.pop(rid, None)

    def resolve(self, rid: int, ok: bool, value: object) -> None:
        with self._lock:
            future = self._waiting.pop(rid, None)
        if future is None:
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value if isinstance(value, BaseException) else KnowledgeBaseError(str(value)))

    def fail_all(self, exc: BaseException) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            with contextlib.suppress(Exception):
                future.set_exception(exc)


class RemoteCollection:
    """A Chroma collection read through the serving process. Reads only: anything else raises."""

    def __init__(self, channel: _Channel, name: str, metadata: dict | None):
        self._channel, self.name, self.metadata = channel, name, metadata

    def _read(self, method: str, **kwargs: object):
        return self._channel.request("chroma", self.name, method, kwargs)

    def get(self, **kwargs: object):
        return self._read("get", **kwargs)

    def query(self, **kwargs: object):
        return self._read("query", **kwargs)

    def count(self) -> int:
        return self._read("count")  # type: ignore[return-value]

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        raise KnowledgeBaseError(f"an answering process only reads the store (Chroma {name} refused)")


class RemoteChroma:
    """The Chroma client of an answering process: collections are opened (never created) by the serving
    process, which holds the only client of the embedded store."""

    def __init__(self, channel: _Channel):
        self._channel = channel

    def get_collection(self, name: str, embedding_function: object = None) -> RemoteCollection:
        metadata = self._channel.request("chroma", name, "open", {})
        return RemoteCollection(self._channel, name, metadata)  # type: ignore[arg-type]

    def get_or_create_collection(
        self, name: str, metadata: dict | None = None, embedding_function: object = None
    ) -> RemoteCollection:
        return self.get_collection(name)  # a missing collection is an error here, never created

    def delete_collection(self, name: str) -> None:
        raise KnowledgeBaseError("an answering process only reads the store (Chroma delete_collection refused)")

    def close(self) -> None:
        pass


class ReadOnlyStore(KnowledgeStore):
    """The store as an answering process sees it: the registry and the keyword/vector files directly, Chroma
    through the serving process; no recovery (the serving process owns it), no data-dir lock."""

    def __init__(self, settings, channel: _Channel):  # noqa: ANN001 - ToolSettings
        self._channel = channel
        super().__init__(settings)

    def _recover_registry(self) -> None:
        pass

    def recover_all(self) -> None:
        pass

    def recover(self, kb: str) -> None:
        pass

    def _open_client(self) -> None:
        self._handle.client = RemoteChroma(self._channel)


class RemoteMembership:
    """Channel memberships, looked up by the serving process (its Slack client and cache). A failure raises:
    the caller fails closed (no restricted KB)."""

    def __init__(self, channel: _Channel):
        self._channel = channel

    def channels_of(self, user: str, channels: Iterable[str]) -> frozenset[str]:
        return frozenset(self._channel.request("membership", user, tuple(channels), timeout=30.0))  # type: ignore[arg-type]


def _portable(exc: BaseException) -> BaseException:
    """The exception itself if it survives the pipe, else a KnowledgeBaseError or RuntimeError saying what it was."""
    try:
        return pickle.loads(pickle.dumps(exc))
    except Exception:
        kind = KnowledgeBaseError if isinstance(exc, KnowledgeBaseError) else RuntimeError
        return kind(f"{type(exc).__name__}: {exc}")


def _serve(conn, settings: Settings, threads: int, warm: bool) -> None:  # noqa: ANN001 - a Connection
    """An answering process: one KnowledgeBot, `threads` questions at a time."""
    # Ctrl-C and a service manager's SIGTERM reach the whole process group: the serving process still drains
    # its questions through this one, which ends when it is told to ("stop") or the pipe closes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # A spawned process starts with the server's environment (multiprocessing has no way to pass another): the
    # Slack credentials are dropped before anything here could read them. The kernel's copy of the initial
    # environment (/proc/<pid>/environ, readable by the same user only) still holds them.
    for name in SLACK_SECRETS:
        os.environ.pop(Settings.model_fields[name].alias or name.upper(), None)
    from bot.core.bot import KnowledgeBot
    from tools.service import KnowledgeService

    logging.basicConfig(
        level=logging.WARNING, format=f"kbbot-answer[{os.getpid()}] %(levelname)s %(name)s: %(message)s"
    )
    channel = _Channel(conn)
    tools = settings.tools
    service = KnowledgeService(tools, store=ReadOnlyStore(tools, channel))
    bot = KnowledgeBot(settings, membership=RemoteMembership(channel), service=service)
    bot.reads_declarations = False
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kbbot-answer")

    def answer(qid: int, origin: Origin, question: str, history: Sequence[Turn], silent: bool, statuses: bool) -> None:
        on_status = (lambda text: channel.send(("status", qid, text))) if statuses else None
        try:
            result = bot.ask(origin, question, history, on_status=on_status, silent_refusals=silent)
        except BaseException as exc:  # everything goes back to the caller, which decides what people see
            if isinstance(exc, KnowledgeBaseError):  # the reason is in the message (logged there too)
                log.warning("answering failed: %s", exc)
            elif not isinstance(exc, EmptyQuestion):  # its traceback is only here
                log.exception("answering failed")
            channel.send_outcome("result", qid, False, _portable(exc))
        else:
            channel.send_outcome("result", qid, True, result)

    def warm_up() -> None:
        try:
            if warm:
                bot.warm_up()
                bot.prefetch_texts()  # each text read later would be a round trip through the serving process
        except Exception as exc:
            log.warning("warm-up skipped: %s", exc)
        with contextlib.suppress(Exception):
            channel.send(("ready", os.getpid()))

    threading.Thread(target=warm_up, name="kbbot-warm", daemon=True).start()
    try:
        while True:
            try:
                message = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "ask":
                pool.submit(answer, *message[1:])
            elif kind == "reply":
                channel.resolve(*message[1:])
            elif kind == "stop":
                break
    finally:
        channel.fail_all(WorkerGone("the serving process went away"))
        pool.shutdown(wait=False, cancel_futures=True)
        os._exit(0)  # daemon threads may hold sqlite/openvino state: no interpreter teardown


# --- the serving process's side ----------------------------------------------------------------


def _without_slack_secrets(settings: Settings) -> Settings:
    """An answering process talks to no one but its serving process (and the LLM): no Slack credentials (its
    environment loses them too, in `_serve`)."""
    return settings.model_copy(update=dict.fromkeys(SLACK_SECRETS))


class _Worker:
    def __init__(self, owner: AnswerProcesses, index: int):
        self.owner, self.index = owner, index
        context = multiprocessing.get_context("spawn")  # never a fork of a process running threads
        self.conn, child = context.Pipe(duplex=True)
        self.channel = _Channel(self.conn)
        self.process = context.Process(
            target=_serve,
            args=(child, _without_slack_secrets(owner.settings), owner.threads, owner.warm),
            daemon=True,
            name=f"kbbot-answer-{index}",
        )
        self.ready = threading.Event()
        self.started = False  # it said it is ready
        self.gone = False
        self.in_flight = 0
        self._questions: dict[int, tuple[Future, Callable[[str], None] | None]] = {}
        self._lock = threading.Lock()
        self.process.start()
        child.close()
        self.reader = threading.Thread(target=self._read, name=f"kbbot-answer-{index}-pipe", daemon=True)
        self.reader.start()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def ask(self, qid: int, payload: tuple, on_status: Callable[[str], None] | None) -> Future:
        future: Future = Future()
        with self._lock:
            if self.gone:
                raise WorkerGone("the answering process stopped")
            self._questions[qid] = (future, on_status)
            self.in_flight += 1
        try:
            self.channel.send(("ask", qid, *payload, on_status is not None))
        except Exception as exc:
            self._finish(qid)
            if isinstance(exc, OSError):  # the pipe is closed: the process is gone
                raise WorkerGone(f"the answering process cannot be reached ({type(exc).__name__})") from None
            # e.g. not picklable: no other process could be handed it either
            raise KnowledgeBaseError(f"the question cannot be handed to an answering process: {exc!r:.200}") from exc
        return future

    def _finish(self, qid: int) -> tuple[Future, Callable[[str], None] | None] | None:
        with self._lock:
            entry = self._questions.pop(qid, None)
            if entry is not None:
                self.in_flight -= 1
            return entry

    def _read(self) -> None:
        try:
            while True:
                message = pickle.loads(self.conn.recv_bytes())
                kind = message[0]
                if kind == "result":
                    _, qid, ok, value = message
                    entry = self._finish(qid)
                    if entry is not None and ok:
                        entry[0].set_result(value)
                    elif entry is not None:
                        entry[0].set_exception(value)
                elif kind == "status":
                    _, qid, text = message
                    with self._lock:
                        entry = self._questions.get(qid)
                    if entry is not None and entry[1] is not None:
                        with contextlib.suppress(Exception):
                            entry[1](text)
                elif kind == "rpc":
                    _, rid, what, args = message
                    self.owner.serve_request(self, rid, what, args)
                elif kind == "ready":
                    self.started = True
                    self.ready.set()
                    self.owner.worker_ready()
        except (EOFError, OSError):
            pass
        except Exception:
            log.exception("answering process %s: unreadable message; stopping it", self.pid)
        self._gone()

    def _gone(self) -> None:
        with self._lock:
            self.gone = True
            questions, self._questions = self._questions, {}
            self.in_flight = 0
        # The pipe is unreadable or closed: a process still running could never be heard from again.
        with contextlib.suppress(Exception):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.conn.close()
        for future, _ in questions.values():
            with contextlib.suppress(Exception):
                future.set_exception(WorkerGone("the answering process stopped while answering"))
        self.ready.set()  # nobody waits for a worker that is gone
        self.owner.worker_gone(self)

    def kill(self, why: str) -> None:
        """Stop it now: its reader sees the pipe close and fails what it held (asked again elsewhere), and the
        owner starts another."""
        log.warning("answering process %s %s; killing it", self.pid, why)
        with contextlib.suppress(Exception):
            self.process.kill()

    def stop(self, timeout: float = 5.0) -> None:
        with contextlib.suppress(Exception):
            self.channel.send(("stop",))
        self.process.join(timeout)
        if self.process.is_alive():
            with contextlib.suppress(Exception):
                self.process.kill()
            self.process.join(timeout)
        with contextlib.suppress(Exception):
            self.conn.close()


class AnswerProcesses:
    """`ask` like KnowledgeBot's, answered by one of `count` answering processes (started by `start()`, in
    the background), or by `bot` itself while none is running."""

    def __init__(
        self, bot: KnowledgeBot, count: int, threads: int, warm: bool = True, answer_timeout_s: float | None = None
    ):
        self.bot, self.settings, self.count, self.threads, self.warm = bot, bot.settings, count, threads, warm
        # how long a worker may hold a question before it is taken for stuck
        self.answer_timeout_s = answer_timeout_s or self.settings.question_deadline_s + EXTRA_WAIT_S
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._rpc = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kbbot-answer-rpc")
        self._closed = False
        self._restarting: set[threading.Timer] = set()  # replacements not started yet (cancelled by close)
        self.restarts = 0
        self._failed_starts = 0  # in a row: workers that died before they were ready, since one was
        self.requests: Counter[str] = Counter()  # what the answering processes asked of this one
        self.in_process = 0  # questions answered by the serving process (no worker running)

    def start(self) -> AnswerProcesses:
        for index in range(self.count):
            self._spawn(index)
        return self

    def _spawn(self, index: int) -> None:
        try:
            worker = _Worker(self, index)
        except Exception as exc:
            log.error("could not start answering process %d: %s: %s", index, type(exc).__name__, exc)
            return
        with self._lock:
            if self._closed:
                worker.stop()
                return
            self._workers.append(worker)

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout
        for worker in list(self._workers):
            if not worker.ready.wait(max(0.0, deadline - time.monotonic())):
                return False
        return bool(self._workers) and all(not w.gone for w in self._workers)

    def pids(self) -> list[int]:
        with self._lock:
            return [w.pid for w in self._workers if w.pid and not w.gone]

    def worker_gone(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
            if self._closed:
                return
            if not worker.started:  # died before it could answer: starting another may well fail again
                self._failed_starts += 1
            give_up = not worker.started and self._failed_starts >= MAX_FAILED_STARTS
        worker.process.join(1)
        if give_up:
            log.error(
                "answering process %s stopped before it was ready (exit %s), as did the %d before it: no more are "
                "started (questions are answered by those left, or in the serving process)",
                worker.pid,
                worker.process.exitcode,
                MAX_FAILED_STARTS - 1,
            )
            return
        timer = threading.Timer(RESTART_DELAY_S, self._restart, args=(worker.index,))
        timer.daemon = True
        with self._lock:
            if self._closed:  # closing began meanwhile
                return
            self._restarting.add(timer)
            self.restarts += 1
        log.warning("answering process %s stopped (exit %s); starting another", worker.pid, worker.process.exitcode)
        timer.start()

    def worker_ready(self) -> None:
        with self._lock:
            self._failed_starts = 0

    def _restart(self, index: int) -> None:
        with self._lock:
            self._restarting.discard(threading.current_thread())  # type: ignore[arg-type]
        self._spawn(index)

    def _pick(self, tried: Collection[_Worker] = ()) -> _Worker | None:
        with self._lock:
            alive = [w for w in self._workers if not w.gone and w not in tried]
        if not alive:
            return None
        ready = [w for w in alive if w.ready.is_set()] or alive
        return min(ready, key=lambda w: w.in_flight)

    def ask(
        self,
        origin: Origin,
        question: str,
        history: Sequence[Turn] = (),
        kb: str | None = None,
        on_status: Callable[[str], None] | None = None,
        silent_refusals: bool = False,
    ) -> AskResult:
        """The question answered by the least busy answering process; by another one (or this process) if that
        one stops meanwhile — once: a worker that died after recording its answer leaves a second record."""
        tried: list[_Worker] = []
        while True:
            if self._closed:
                raise Stopping("kbbot is stopping")
            worker = self._pick(tried) if kb is None else None
            if worker is None:
                self.in_process += 1
                return self.bot.ask(origin, question, history, kb, on_status=on_status, silent_refusals=silent_refusals)
            self.bot.refresh_if_changed()  # the rules the worker reads are at least as new as this process's
            tried.append(worker)
            qid = next(self._ids)
            try:
                future = worker.ask(qid, (origin, question, tuple(history), silent_refusals), on_status)
                return future.result(self.answer_timeout_s)
            except TimeoutError:
                # A stuck worker would look the least busy once this question is off its count: it goes, and
                # what else it held is asked again elsewhere.
                worker._finish(qid)
                worker.kill(f"did not answer a question in {self.answer_timeout_s:g} s")
                raise WorkerGone("the answering process did not answer in time") from None
            except WorkerGone:
                if self._closed:
                    raise Stopping("kbbot is stopping") from None
                if len(tried) > 1:
                    raise
                log.warning("answering process %s stopped while answering; asking again elsewhere", worker.pid)

    # Requests of the answering processes, carried out here (on a small pool, not on the pipe's reader).

    def serve_request(self, worker: _Worker, rid: int, what: str, args: tuple) -> None:
        self.requests[what if what != "chroma" else f"chroma.{args[1]}"] += 1  # for measurements

        def run() -> None:
            try:
                result = self._carry_out(what, args)
            except BaseException as exc:
                worker.channel.send_outcome("reply", rid, False, _portable(exc))
            else:
                worker.channel.send_outcome("reply", rid, True, result)

        try:
            self._rpc.submit(run)
        except RuntimeError:  # shutting down
            worker.channel.send_outcome("reply", rid, False, KnowledgeBaseError("kbbot is stopping"))

    def _carry_out(self, what: str, args: tuple) -> object:
        if what == "membership":
            user, channels = args
            membership = self.bot.membership
            return frozenset() if membership is None else membership.channels_of(user, channels)
        if what == "chroma":
            name, method, kwargs = args
            store = self.bot.service.store
            collection = store.collection_named(name, create=False)
            if method == "open":
                return dict(getattr(collection, "metadata", None) or {})
            if method not in CHROMA_READS:
                raise KnowledgeBaseError(f"Chroma {method} is not a read")
            with store.chroma_errors():
                result = getattr(collection, method)(**kwargs)
            return dict(result) if isinstance(result, dict) else result
        raise KnowledgeBaseError(f"unknown request {what!r}")

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, []
            restarting, self._restarting = self._restarting, set()
        for timer in restarting:
            timer.cancel()
        for worker in workers:
            worker.stop(timeout)
        self._rpc.shutdown(wait=False, cancel_futures=True)
