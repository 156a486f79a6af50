"""Durable records in the data dir: which answers were given, and what people said about them.

`<data dir>/slack/answers.jsonl` gets one line per answer posted (id, question, status, KBs, citations);
`<data dir>/slack/feedback.jsonl` one line per feedback click, with the question looked up by answer id.
Lines are appended under a lock, flushed and fsynced, so a crash loses at most the line being written.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path

from bot.agent.models import Answer

log = logging.getLogger(__name__)


def new_answer_id() -> str:
    return uuid.uuid4().hex[:16]


class JsonLines:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def append(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())

    def read(self) -> list[dict]:
        if not self.path.exists():
            return []
        records = []
        with self.path.open(encoding="utf-8") as handle:
            for line in handle:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a torn last line after a crash
        return records


class SlackRecords:
    def __init__(self, directory: Path, remembered: int = 2000):
        self.answers = JsonLines(directory / "answers.jsonl")
        self.feedback = JsonLines(directory / "feedback.jsonl")
        self._recent: OrderedDict[str, dict] = OrderedDict()
        self._remembered = remembered
        self._lock = threading.Lock()

    def log_answer(
        self, answer: Answer, *, answer_id: str, surface: str, channel: str | None, thread_ts: str | None, user: str | None
    ) -> dict:
        record = {
            "answer_id": answer_id,
            "time": time.time(),
            "surface": surface,
            "channel": channel,
            "thread_ts": thread_ts,
            "user": user,
            "question": answer.question,
            "standalone_query": answer.standalone_query,
            "status": answer.status,
            "answer": answer.answer,
            "kbs": answer.searched_kbs or answer.route.kbs,
            "citations": [{"n": c.n, "kb": c.kb, "document": c.document, "chunk_id": c.chunk_id} for c in answer.citations],
            "mode": answer.mode,
            "rounds": len(answer.rounds),
        }
        try:
            self.answers.append(record)
        except OSError as exc:  # the answer still goes out; the log is best effort
            log.warning("could not record answer %s: %s", answer_id, exc)
        with self._lock:
            self._recent[answer_id] = record
            while len(self._recent) > self._remembered:
                self._recent.popitem(last=False)
        return record

    def find_answer(self, answer_id: str) -> dict | None:
        with self._lock:
            if answer_id in self._recent:
                return self._recent[answer_id]
        for record in reversed(self.answers.read()):  # after a restart
            if record.get("answer_id") == answer_id:
                return record
        return None

    def log_feedback(
        self, *, answer_id: str, value: str, user: str | None, channel: str | None, message_ts: str | None
    ) -> dict:
        answer = self.find_answer(answer_id) or {}
        record = {
            "time": time.time(),
            "answer_id": answer_id,
            "value": value,
            "user": user,
            "channel": channel,
            "message_ts": message_ts,
            "question": answer.get("question"),
            "answer_status": answer.get("status"),
            "kbs": answer.get("kbs"),
        }
        self.feedback.append(record)
        return record
