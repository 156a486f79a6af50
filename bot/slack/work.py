"""Bounded work pools: what the listeners hand slow work to, so Bolt's threads only ever acknowledge.

A pool refuses work when it already holds `capacity` tasks (running or waiting): the caller tells the
person the bot is busy instead of letting a burst queue up without bound. Questions and ingests have
pools of their own, so a long upload never starves answers.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

log = logging.getLogger(__name__)


class WorkPool:
    def __init__(self, name: str, workers: int, capacity: int):
        self.name = name
        self.workers = workers
        self.capacity = max(capacity, workers)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._pending = 0
        self._closed = False
        self.submitted = 0  # accepted since start (for tests and measurements)
        self.refused = 0

    def submit(self, fn: Callable, *args, **kwargs) -> bool:
        """Run fn(*args, **kwargs) on the pool; False (nothing runs) when the pool is full or closed."""
        with self._lock:
            if self._closed or self._pending >= self.capacity:
                self.refused += 1
                return False
            self._pending += 1
            self.submitted += 1
        try:
            self._executor.submit(self._run, fn, args, kwargs)
        except RuntimeError:  # shut down meanwhile
            self._finished()
            return False
        return True

    def start_threads(self) -> None:
        start_threads(self._executor, self.workers)

    def _run(self, fn: Callable, args: tuple, kwargs: dict) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:
            log.exception("%s task %s failed", self.name, getattr(fn, "__name__", fn))
        finally:
            self._finished()

    def _finished(self) -> None:
        with self._lock:
            self._pending -= 1
            self._done.notify_all()

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def idle(self) -> bool:
        return self.pending == 0

    def close(self) -> None:
        """Accept nothing more (what was accepted still runs)."""
        with self._lock:
            self._closed = True

    def drain(self, timeout_s: float) -> bool:
        """Accept nothing more and wait (at most timeout_s) for what was accepted; True if it all finished."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            self._closed = True
            while self._pending and time.monotonic() < deadline:
                self._done.wait(timeout=max(0.0, deadline - time.monotonic()))
            finished = self._pending == 0
        self._executor.shutdown(wait=finished, cancel_futures=not finished)
        return finished


class TrackedExecutor(ThreadPoolExecutor):
    """A thread pool that knows how many tasks it holds (Bolt's listener executor: a stop or a test can
    wait until every acknowledged request has been handled)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._pending = 0

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        with self._lock:
            self._pending += 1
        try:
            return super().submit(self._tracked, fn, *args, **kwargs)
        except RuntimeError:
            self._done()
            raise

    def _tracked(self, fn: Callable, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            self._done()

    def _done(self) -> None:
        with self._lock:
            self._pending -= 1

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def wait_idle(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.pending and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.pending == 0


def fire_and_forget(executor: ThreadPoolExecutor, fn: Callable, *args) -> Future | None:
    """A small Slack call off the caller's thread (a reaction, a status); never raises."""
    try:
        return executor.submit(fn, *args)
    except RuntimeError:  # shutting down
        return None


def start_threads(executor: ThreadPoolExecutor, count: int, timeout_s: float = 10.0) -> None:
    """Start `count` (at most its max_workers) of the pool's threads now. A ThreadPoolExecutor starts a thread
    for a task only when none is idle, so the first burst of mentions would start them one by one, each while
    holding the lock that every pool's submit takes (concurrent.futures' global shutdown lock) and waiting
    for the new thread to win the GIL from the answer threads already busy."""
    barrier = threading.Barrier(count + 1)

    def wait_for_the_others() -> None:  # every thread busy until all are started: each submit starts one
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout_s)

    for _ in range(count):
        executor.submit(wait_for_the_others)
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout_s)
