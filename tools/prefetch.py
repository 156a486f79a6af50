"""Run a generator ahead of its consumer on a thread of its own, so the two overlap.

Ingest uses it to parse and chunk the next documents while the model embeds the current group: the
model's arithmetic releases the interpreter lock, and the preparing thread's Python runs meanwhile.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_ITEM, _ERROR, _DONE = "item", "error", "done"


class Prefetched(Generic[T]):
    """Iterate `items` on a background thread, at most `max_ahead` (summed `weight`) ahead of the consumer.

    One item is always allowed ahead, however heavy. An exception raised by the producer is raised again
    in the consumer, in its place in the order. Use as a context manager: leaving it (normally, on an
    error, on Ctrl-C) stops the producer after the item it is working on and waits for it, so nothing
    runs on after the caller has moved on.
    """

    def __init__(
        self,
        items: Iterable[T],
        max_ahead: int,
        weight: Callable[[T], int] = lambda _item: 1,
        name: str = "prefetch",
    ):
        self._items = items
        self._max_ahead = max(1, max_ahead)
        self._weight = weight
        self._ready: deque[tuple[str, object, int]] = deque()
        self._ahead = 0
        self._stopped = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._produce, name=name, daemon=True)

    def __enter__(self) -> Prefetched[T]:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _produce(self) -> None:
        try:
            for item in self._items:
                if not self._put(_ITEM, item, max(0, self._weight(item))):
                    return
        except BaseException as exc:  # handed to the consumer, which decides
            self._put(_ERROR, exc, 0)
            return
        self._put(_DONE, None, 0)

    def _put(self, kind: str, value: object, weight: int) -> bool:
        with self._changed:
            while not self._stopped and self._ahead and self._ahead + weight > self._max_ahead:
                self._changed.wait()
            if self._stopped:
                return False
            self._ready.append((kind, value, weight))
            self._ahead += weight
            self._changed.notify_all()
            return True

    def __iter__(self) -> Iterator[T]:
        while True:
            with self._changed:
                while not self._ready:
                    self._changed.wait()
                kind, value, weight = self._ready.popleft()
                self._ahead -= weight
                self._changed.notify_all()
            if kind == _DONE:
                return
            if kind == _ERROR:
                raise value  # type: ignore[misc]
            yield value  # type: ignore[misc]

    def close(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
