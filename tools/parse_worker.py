"""Parse untrusted files in a worker process, under a hard wall-time limit and a memory cap.

Pure-Python parsing cannot stop itself in the middle of a library call (a PDF content stream of
70 MB of operators, a page tree of 100,000 leaves), and a MemoryError may come too late to recover
from. So `parse_isolated` runs the cheap refusals in-process (tools.parsing.precheck), then hands the
bytes to a worker: a child process started from a clean `forkserver` (never a plain fork of a process
that runs torch threads), with its address space capped by RLIMIT_AS. The caller waits at most
`ParseLimits.timeout_s`; on expiry the worker is killed and the file refused with a message naming the
limit. A worker that dies (out of memory, a crash in a C extension) fails the file, never the caller.

Workers are reused between files (a pool, one per concurrent caller), so the cost per file is one
round trip through a pipe. Nothing here touches the store: a killed worker leaves every KB unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
import time
from pathlib import Path

from tools.parsing import (
    DEFAULT_LIMITS,
    ParsedDocument,
    ParseLimits,
    UnreadableDocument,
    parse_file,
    precheck,
)

log = logging.getLogger(__name__)

# Libraries the forkserver imports once, so each worker forked from it starts with them loaded. Not
# kbbot's own modules: Python 3.11's forkserver ignores the caller's sys.path, so it could import them
# from another checkout; each worker imports them itself, after taking the caller's sys.path.
_PRELOAD = ["charset_normalizer", "bs4", "html.parser", "pypdf", "docx", "lxml.etree"]
MAX_IDLE_WORKERS = 2
# A worker that grew past this much resident memory (one huge file) exits after replying; the next
# file gets a fresh one instead of a bloated process.
RECYCLE_RSS_MB = 512
MAX_FILES_PER_WORKER = 500


def parse_isolated(path: Path, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """parse_file(path, data, limits) in a worker process; raises UnreadableDocument for any failure."""
    precheck(path, data, limits)
    return _POOL.parse(path.name, data, limits)


# --- the worker side ------------------------------------------------------------------------------


def _serve(conn, memory_mb: int) -> None:  # noqa: ANN001 - a multiprocessing Connection
    import resource

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mb > 0:
        cap = memory_mb * 1024 * 1024
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    for served in range(1, MAX_FILES_PER_WORKER + 1):
        try:
            name, data, limits = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple = ("ok", parse_file(Path(name), data, limits))
        except UnreadableDocument as exc:
            reply = ("refused", str(exc))
        except MemoryError:
            reply = ("memory", None)
        except BaseException as exc:  # a bug or a library failure: report it, keep the process honest
            reply = ("error", type(exc).__name__)
        del data
        # Retire after many files, or once one file made this process big: the caller is told, so it
        # never sends another file to a process that is leaving.
        retiring = served >= MAX_FILES_PER_WORKER or _rss_mb() > RECYCLE_RSS_MB
        try:
            conn.send((*reply, retiring))
        except MemoryError:
            conn.send(("memory", None, True))
            return
        if retiring:
            return


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# --- the caller side ------------------------------------------------------------------------------


class _Worker:
    def __init__(self, context, memory_mb: int):  # noqa: ANN001 - a multiprocessing context
        self.memory_mb = memory_mb
        self.conn, child = context.Pipe(duplex=True)
        self.process = context.Process(target=_serve, args=(child, memory_mb), daemon=True, name="kbbot-parse")
        self.process.start()
        child.close()

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.join(5)
        with contextlib.suppress(Exception):
            self.conn.close()


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # held only to take or return a worker, never while parsing
        self._idle: list[_Worker] = []
        self._context = None

    def _get_context(self):
        if self._context is None:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
            if context.get_start_method() == "forkserver":
                with contextlib.suppress(Exception):
                    context.set_forkserver_preload(_PRELOAD)
            self._context = context
        return self._context

    def _take(self, memory_mb: int) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive() and worker.memory_mb == memory_mb:
                    return worker
                worker.kill()
            context = self._get_context()
        return _Worker(context, memory_mb)

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if worker.alive() and len(self._idle) < MAX_IDLE_WORKERS:
                self._idle.append(worker)
                return
        worker.kill()

    def parse(self, name: str, data: bytes, limits: ParseLimits) -> ParsedDocument:
        try:
            worker = self._take(limits.max_memory_mb)
        except Exception as exc:  # fail closed: never parse without the time and memory limits
            log.warning("cannot start a parsing worker: %s: %s", type(exc).__name__, exc)
            raise UnreadableDocument(
                "the parsing worker could not be started (the system is short of processes or memory); try again"
            ) from None
        try:
            worker.conn.send((name, data, limits))
        except (BrokenPipeError, EOFError, OSError):  # it died while idle: one fresh worker, once
            worker.kill()
            worker = self._take(limits.max_memory_mb)
            try:
                worker.conn.send((name, data, limits))
            except (BrokenPipeError, EOFError, OSError):
                code = _exit_code(worker)
                worker.kill()
                raise UnreadableDocument(f"the parsing worker could not start ({_describe_exit(code)})") from None
        started = time.monotonic()
        try:
            ready = worker.conn.poll(max(0.0, limits.timeout_s))
            if not ready:
                worker.kill()
                log.warning("parsing %s took over %.1f s: worker killed", name, time.monotonic() - started)
                raise UnreadableDocument(limits.timeout_refusal())
            try:
                kind, value, retiring = worker.conn.recv()
            except (EOFError, OSError, MemoryError):
                code = _exit_code(worker)
                worker.kill()
                if code == -9:  # SIGKILL from outside: the kernel's OOM killer, most likely
                    raise UnreadableDocument(limits.memory_refusal()) from None
                raise UnreadableDocument(
                    f"the parser stopped unexpectedly ({_describe_exit(code)}); the file is probably malformed"
                ) from None
        except BaseException:
            worker.kill()
            raise
        if retiring:
            worker.kill()
        else:
            self._give_back(worker)
        if kind == "ok":
            return value
        if kind == "refused":
            raise UnreadableDocument(value)
        if kind == "memory":
            raise UnreadableDocument(limits.memory_refusal())
        raise UnreadableDocument(f"the {Path(name).suffix[1:].upper() or 'file'} could not be read ({value})")

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


def _exit_code(worker: _Worker) -> int | None:
    worker.process.join(1)
    return worker.process.exitcode


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        import signal

        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit status {code}"


_POOL = _Pool()


def shutdown() -> None:
    """Stop the idle workers (they are daemons, so they also go when this process exits)."""
    _POOL.close()


def worker_pids() -> list[int]:
    """The idle workers' process ids (for tests and diagnostics)."""
    with _POOL._lock:
        return [w.process.pid for w in _POOL._idle if w.process.pid]
