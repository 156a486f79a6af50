"""The reliability suite's figures: what it tried and what survived, printed as one line at the end.

Tests add to them as they go (`figures.add("faults_survived")`, `figures.observe_ack(ms)`); the line is
printed by `pytest_terminal_summary` in tests/conftest.py whenever a reliability test ran.
"""

from __future__ import annotations

import math
import threading

_lock = threading.Lock()
_counts: dict[str, int] = {"faults_survived": 0, "bad_inputs_tried": 0, "events_held": 0, "lost": 0}
_acks_ms: list[float] = []


def add(name: str, n: int = 1) -> None:
    with _lock:
        _counts[name] = _counts.get(name, 0) + n


def observe_ack(ms: float) -> None:
    with _lock:
        _acks_ms.append(ms)


def p99_ack_ms() -> float | None:
    with _lock:
        if not _acks_ms:
            return None
        ordered = sorted(_acks_ms)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def touched() -> bool:
    with _lock:
        return bool(_acks_ms) or any(_counts.values())


def line() -> str:
    with _lock:
        counts = dict(_counts)
    p99 = p99_ack_ms()
    ack = f"{p99:.0f} ms" if p99 is not None else "n/a"
    return (
        f"reliability: faults survived {counts['faults_survived']} · bad inputs tried {counts['bad_inputs_tried']} · "
        f"events held {counts['events_held']} · p99 ack {ack} · lost = {counts['lost']}"
    )
