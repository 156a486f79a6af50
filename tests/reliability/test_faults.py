"""Faults survived: `kill -9` of an ingest at named points, and a Chroma server that goes away mid-question.

kill -9: every scenario runs `kbbot ingest` in its own data dir through a small wrapper that installs a
hook at the named point: the hook writes a marker file and waits there. The test kills the process only
after seeing the marker, and checks the store at that moment (the kill landed where it is named: e.g.
mid-embedding means the version is `processing` with none of its chunks written yet), then restarts:

- parsing:      the new file is being parsed (nothing recorded yet)
- embedding:    one batch of a ~150-chunk file embedded by MiniLM, more to go; and (replacing v1) the
                process waiting on an OpenAI-compatible endpoint's answer
- before-flip:  every chunk of the new version written, the registry flip not started
- inside-flip:  inside the flip's SQLite transaction, its statements run, the COMMIT not reached

After the restart nothing is half visible: `kbbot kb list` (registry only) already shows no
`processing` document; once the store is opened the killed version's chunks are gone, every document is
`ready` (the old version) or `failed` with a reason, the invariants hold, and the file ingests again.

The scenarios start together (each child loads the model; on a shared 2-core machine that dominates).
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import figures
from helpers.cli import child_env
from helpers.fake_embeddings import FakeEmbeddings
from helpers.invariants import assert_consistent, lost
from helpers.settings import build_settings

from bot.config import Settings
from tools.service import KnowledgeService
from tools.store import KnowledgeBaseError

KB = "faults"

_HOOKED_INGEST = textwrap.dedent(
    """
    import pathlib, sys, time

    marker, point = pathlib.Path(sys.argv[1]), sys.argv[2]

    def reached():
        marker.write_text(point)
        time.sleep(600)  # killed here

    if point == "parsing":
        import tools.ingest as ingest
        real_parse = ingest.parse_isolated

        def parse_isolated(*args, **kwargs):
            reached()
            return real_parse(*args, **kwargs)

        ingest.parse_isolated = parse_isolated
    elif point == "embedding":  # one forward pass done, the rest to go, on whichever runtime runs MiniLM
        import onnxruntime
        from sentence_transformers import SentenceTransformer
        from tools.openvino_minilm import _InferSession
        calls = [0]

        def second_pass_stops(cls, method):
            real = getattr(cls, method)

            def hooked(self, *args, **kwargs):
                calls[0] += 1
                if calls[0] == 2:
                    reached()
                return real(self, *args, **kwargs)

            setattr(cls, method, hooked)

        second_pass_stops(onnxruntime.InferenceSession, "run")
        second_pass_stops(_InferSession, "run")  # OpenVINO's forward pass
        second_pass_stops(SentenceTransformer, "encode")
    elif point == "embedding-remote":
        pass  # the embeddings endpoint (helpers/fake_embeddings.py) holds the request and writes the marker
    elif point in ("before-flip", "inside-flip"):
        from tools import registry
        real_publish = registry.Registry.publish_versions

        def publish_versions(self, *args, **kwargs):
            if point == "before-flip":
                reached()
            with self._connect() as db:  # the flip's last statement, inside its transaction
                db.set_trace_callback(
                    lambda sql: reached() if sql.lstrip().startswith("UPDATE kbs SET generation") else None
                )
            return real_publish(self, *args, **kwargs)

        registry.Registry.publish_versions = publish_versions
    else:
        raise SystemExit(f"unknown hook point {point}")

    from bot.cli import main
    sys.exit(main(sys.argv[3:]))
    """
)


@dataclass
class Crash:
    name: str
    point: str
    has_v1: bool
    settings: Settings
    marker: Path
    big: bool
    process: subprocess.Popen | None = None
    v1_chunks: int = 0
    new_chunks: int = 0
    seen: str = ""  # what the store looked like when the kill landed

    @property
    def version(self) -> int:
        return 2 if self.has_v1 else 1


# (name, hook point, has a live v1, embeddings). "minilm" is the default local model (the child loads
# torch: seconds of CPU); "remote" is an OpenAI-compatible endpoint on 127.0.0.1 (helpers/fake_embeddings),
# so most children start fast. Mid-embedding is covered both ways: inside MiniLM's forward passes, and
# waiting on the endpoint's answer.
SCENARIOS = [
    ("parsing", "parsing", True, "remote"),
    ("embedding-minilm-first-version", "embedding", False, "minilm"),
    ("embedding-remote-replacing-v1", "embedding-remote", True, "remote"),
    ("before-flip", "before-flip", True, "remote"),
    ("inside-flip-replacing-v1", "inside-flip", True, "remote"),
]


def _manual(path: Path, marker: str, sections: int) -> Path:
    """Every line distinct; 20 sections ≈ 150 chunks (several embedding batches), 2 ≈ 15."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = [f"# Operations manual {marker}\n"]
    for s in range(sections):
        parts.append(f"\n## Procedure {s}\n\n")
        for p in range(4):
            parts.append(
                " ".join(
                    f"Step {s}.{p}.{i}: the {marker} crew checks valve {s * 97 + i} and logs pressure {p * 13 + i} kPa."
                    for i in range(12)
                )
                + "\n\n"
            )
    path.write_text("".join(parts), encoding="utf-8")
    return path


def _rows(path: Path, sql: str, *args: object) -> list[tuple]:
    """Read a SQLite file as a bystander: read-only, no kbbot code (so nothing recovers by accident)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def _registry(settings: Settings, sql: str, *args: object) -> list[tuple]:
    return _rows(settings.data_dir / "registry.sqlite3", sql, *args)


def _chroma_ids(settings: Settings, prefix: str) -> list[str]:
    rows = _rows(
        settings.data_dir / "chroma" / "chroma.sqlite3",
        "SELECT embedding_id FROM embeddings WHERE embedding_id LIKE ?",
        prefix + "%",
    )
    return [r[0] for r in rows]


def _kb_list(settings: Settings) -> list[dict]:
    """`kbbot kb list --json` (bot.cli.main), run here with the settings' environment."""
    from helpers.cli import settings_env

    from bot.cli import main

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in settings_env(settings).items():
            patch.setenv(name, value)
        with contextlib.redirect_stdout(out):
            assert main(["kb", "list", "--json"]) == 0
    return json.loads(out.getvalue())


def _landed(crash: Crash) -> str:
    """Check the store at the moment of the kill is what the point's name says; describe it."""
    states = _registry(
        crash.settings, "SELECT state FROM versions WHERE document = 'manual.md' AND version = ?", crash.version
    )
    written = len(_chroma_ids(crash.settings, f"{KB}/manual.md@v{crash.version}#"))
    if crash.point == "parsing":
        assert states == [] and written == 0, (states, written)
        return "parsing: no version recorded"
    assert states == [("processing",)], states
    if crash.point.startswith("embedding"):
        assert written == 0, f"{written} chunks were already written: the kill did not land mid-embedding"
        return "embedding: version processing, no chunk written"
    assert written == crash.new_chunks, f"{written}/{crash.new_chunks} chunks written before the flip"
    return f"{crash.point}: all {written} chunks written, flip not committed"


@pytest.fixture(scope="module")
def crashes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Crash]]:
    from tools.chunking import chunk_document
    from tools.embeddings import get_embedder
    from tools.parsing import parse_file

    shared, holding = FakeEmbeddings().start(), FakeEmbeddings().start()
    runs: dict[str, Crash] = {}
    try:
        for name, point, has_v1, embeddings in SCENARIOS:
            root = tmp_path_factory.mktemp(f"kill-{name}")
            endpoint = holding if point == "embedding-remote" else shared
            extra = endpoint.settings() if embeddings == "remote" else {}
            settings = build_settings(root / "data", KBBOT_KNOWLEDGE_BASES_DIR=root / "none", **extra)
            crash = Crash(name, point, has_v1, settings, root / "reached", big=embeddings == "minilm")
            if point == "embedding-remote":
                holding.hold_on("NEWTEXT", crash.marker)
            new = _manual(root / "v2" / "manual.md", "NEWTEXT", 20 if crash.big else 2)
            with KnowledgeService(settings.tools) as svc:
                svc.create_kb(KB, "kill -9 test")
                if has_v1:
                    old = root / "v1" / "manual.md"
                    old.parent.mkdir()
                    old.write_text(
                        "# Operations manual\n\nThe ORIGINAL procedure: call extension 4410.\n", encoding="utf-8"
                    )
                    crash.v1_chunks = svc.ingest(KB, [old]).documents[0].chunks
            crash.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _HOOKED_INGEST,
                    str(crash.marker),
                    point,
                    "ingest",
                    "--kb",
                    KB,
                    str(new),
                    "--json",
                ],
                env=child_env(settings),
                cwd=str(root),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            runs[name] = crash
        for crash in runs.values():  # while the children start: how many chunks a flip point must see written
            if crash.point.endswith("flip"):
                new = crash.settings.data_dir.parent / "v2" / "manual.md"
                tokenize = get_embedder(crash.settings).tokenize
                crash.new_chunks = len(chunk_document(parse_file(new, new.read_bytes()), tokenize))
        deadline = time.monotonic() + 240
        waiting = dict(runs)
        while waiting:
            assert time.monotonic() < deadline, f"never reached their kill points: {sorted(waiting)}"
            for name, crash in list(waiting.items()):
                if crash.process.poll() is not None:
                    _, err = crash.process.communicate()
                    pytest.fail(
                        f"{name}: ended before reaching {crash.point} (exit {crash.process.returncode}): {err[-2000:]}"
                    )
                if crash.marker.exists():
                    crash.seen = _landed(crash)
                    crash.process.send_signal(signal.SIGKILL)
                    crash.process.wait(30)
                    del waiting[name]
            time.sleep(0.05)
        holding.release()
        yield runs
    finally:
        for crash in runs.values():
            if crash.process.poll() is None:
                crash.process.kill()
                crash.process.wait(30)
            crash.process.communicate()
        shared.stop()
        holding.stop()


@pytest.mark.parametrize("name", [s[0] for s in SCENARIOS])
def test_kill_9_mid_ingest_leaves_nothing_half_visible(name: str, crashes: dict[str, Crash]) -> None:
    crash = crashes[name]
    settings = crash.settings
    assert crash.process.returncode == -signal.SIGKILL, crash.seen
    assert crash.seen, "the kill was not checked against its point"

    # Only listing the KBs (registry only: it may run next to a live bot) settles the registry. In this
    # process, to spare the CPU of another one: nothing of the dead child's lives here anyway.
    listed = {s["name"]: s for s in _kb_list(settings)}[KB]
    assert _registry(settings, "SELECT count(*) FROM versions WHERE state = 'processing'") == [(0,)]
    rows = _registry(settings, "SELECT state, live_version, error FROM documents WHERE name = 'manual.md'")
    if crash.has_v1:
        assert rows[0][:2] == ("ready", 1)
        assert (listed["documents"], listed["ready_documents"], listed["chunks"]) == (1, 1, crash.v1_chunks)
    else:
        assert rows[0][:2] == ("failed", None) and "interrupted" in rows[0][2]
        assert (listed["documents"], listed["ready_documents"], listed["chunks"]) == (1, 0, 0)

    with KnowledgeService(settings.tools) as svc:
        from tools.search import HybridSearcher

        hits = HybridSearcher(svc.store, svc.embedder).search("which valve does the NEWTEXT crew check", KB, k=10)
        assert all("NEWTEXT" not in e.chunk.text for e in hits.evidence), "a chunk of the killed version is visible"
        if crash.has_v1:
            assert [c.version for c in svc.store.live_chunks(KB)] == [1] * crash.v1_chunks
        assert _chroma_ids(settings, f"{KB}/manual.md@v{crash.version}#") == [], "leftovers of the killed version"
        assert_consistent(svc)
        figures.add("lost", lost(svc))
        again = svc.ingest(KB, [_manual(settings.data_dir.parent / "again" / "manual.md", "AGAIN", 1)])
        assert again.documents[0].status == "ready"
        next_version = crash.version if crash.point == "parsing" else crash.version + 1  # parsing: none begun
        assert {c.version for c in svc.store.live_chunks(KB)} == {next_version}
        assert_consistent(svc)
    figures.add("faults_survived")


# --- a Chroma server that goes away mid-question ----------------------------------------------------------


def test_a_chroma_server_stopped_mid_question_is_a_clear_error_and_searching_resumes(
    chroma_server, make_settings, tmp_path: Path
) -> None:
    from bot.agent.engine import AnswerEngine
    from tools.search import HybridSearcher

    settings = make_settings(
        CHROMA_HOST=chroma_server.host, CHROMA_PORT=chroma_server.port, KBBOT_KNOWLEDGE_BASES_DIR=tmp_path / "none"
    )
    where = f"{chroma_server.host}:{chroma_server.port}"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "dock.md").write_text("# Dock\n\nThe loading dock opens at 06:00 on weekdays.\n", encoding="utf-8")
    (docs / "gate.md").write_text("# Gate\n\nGate B closes at 22:00; the night guard has the key.\n", encoding="utf-8")
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "Site operations: loading dock, gates, guards")
        assert svc.ingest(KB, [docs / "dock.md"]).ok
        engine = AnswerEngine(svc, settings)
        assert engine.answer("When does the loading dock open?").status == "answered"
        assert svc.ingest(KB, [docs / "gate.md"]).ok  # a new generation: the next question reads Chroma

        stopped = threading.Event()

        def stop_server(_status: str) -> None:  # the question is under way: the server goes away
            if not stopped.is_set():
                chroma_server.stop()
                stopped.set()

        with pytest.raises(KnowledgeBaseError) as excinfo:
            engine.answer("When does gate B close?", on_status=stop_server)
        assert stopped.is_set()
        message = str(excinfo.value)
        assert message.startswith(f"the Chroma server at {where} is unreachable"), message
        assert "\n" not in message and "CHROMA_HOST" in message
        # Everything that needs Chroma says the same, nothing crashes; registry reads keep working.
        searcher = HybridSearcher(svc.store, svc.embedder)
        with pytest.raises(KnowledgeBaseError, match="unreachable"):
            searcher.search("gate B", KB)
        report = svc.ingest(KB, [(docs / "gate.md")])  # unchanged: needs nothing from Chroma
        assert report.documents[0].status == "unchanged"
        (docs / "yard.md").write_text("# Yard\n\nTrailers park in yard lane 7.\n", encoding="utf-8")
        report = svc.ingest(KB, [docs / "yard.md"])
        assert report.documents[0].status == "failed" and "unreachable" in report.documents[0].error
        assert [s.documents for s in svc.summaries() if s.name == KB] == [3]

        chroma_server.start()  # back on the same port, with its data: no restart of kbbot
        answer = engine.answer("When does gate B close?")
        assert answer.status == "answered" and answer.citations[0].document == "gate.md"
        assert svc.ingest(KB, [docs / "yard.md"]).documents[0].status == "ready"
        assert_consistent(svc)
        figures.add("lost", lost(svc))
    figures.add("faults_survived")
