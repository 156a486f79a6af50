"""tools/prefetch.py: a producer thread ahead of its consumer (ingest prepares documents on it)."""

from __future__ import annotations

import threading

import pytest

from tools.prefetch import Prefetched


def test_items_arrive_in_order_from_another_thread() -> None:
    threads: set[str] = set()

    def produce():
        for number in range(50):
            threads.add(threading.current_thread().name)
            yield number

    with Prefetched(produce(), max_ahead=4, name="producer") as items:
        assert list(items) == list(range(50))
    assert threads == {"producer"}


def test_a_producer_error_is_raised_in_its_place() -> None:
    def produce():
        yield 1
        yield 2
        raise ValueError("document 3 is broken")

    seen = []
    with pytest.raises(ValueError, match="document 3"), Prefetched(produce(), max_ahead=10) as items:
        for item in items:
            seen.append(item)
    assert seen == [1, 2]


def test_the_producer_stays_within_max_ahead_by_weight() -> None:
    produced: list[int] = []
    consumed = threading.Event()
    ahead_when_consuming: list[int] = []

    def produce():
        for weight in [3, 3, 3, 3, 3]:
            produced.append(weight)
            yield weight

    with Prefetched(produce(), max_ahead=7, weight=lambda w: w) as items:
        for _ in items:
            # The consumer is slow: whatever the producer did meanwhile is bounded by max_ahead.
            consumed.wait(0.05)
            ahead_when_consuming.append(len(produced))
    # Taking item n, at most two more items (6 ≤ 7) plus the one being produced can exist.
    assert all(ahead - taken <= 3 for taken, ahead in enumerate(ahead_when_consuming, start=1))


def test_one_heavy_item_still_passes() -> None:
    with Prefetched(iter([100, 1]), max_ahead=5, weight=lambda w: w) as items:
        assert list(items) == [100, 1]


def test_leaving_early_stops_the_producer() -> None:
    produced: list[int] = []

    def produce():
        for number in range(10_000):
            produced.append(number)
            yield number

    with Prefetched(produce(), max_ahead=2) as items:
        for item in items:
            if item == 3:
                break
    count = len(produced)
    assert count < 10  # stopped within the window, not run to the end
    assert len(produced) == count  # and its thread is gone: nothing more is produced
