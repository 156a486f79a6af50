"""One writer per embedded store; several processes only through a Chroma server.

- A process holding the embedded store (a python child that opened it, like a running `kbbot serve`)
  makes a second `kbbot ingest` / `kb sync` / `kb reindex` on the same data dir stop with one clear,
  actionable line and a non-zero exit, changing nothing; `kbbot kb list` (registry only) still works.
- With CHROMA_HOST, two processes on one server each see the other's uploads without a restart.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import figures
from helpers.cli import child_env, kb_list_json, run_kbbot
from helpers.invariants import assert_consistent

from bot.config import Settings
from tools.service import KnowledgeService
from tools.store import KnowledgeBaseError

KB = "shared"

# Opens the store like a running bot (first question: the Chroma client opens), then waits for commands
# on stdin: `search QUERY` prints the documents found, `ingest PATH` ingests a file, `quit` ends.
_RESIDENT = textwrap.dedent(
    """
    import json, sys
    from bot.config import load_settings
    from tools.search import HybridSearcher
    from tools.service import KnowledgeService

    service = KnowledgeService(load_settings().tools)
    searcher = HybridSearcher(service.store, service.embedder)
    searcher.search("warm up", sys.argv[1], k=3)  # every cache warm, the store open
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "search":
            hits = searcher.search(arg, sys.argv[1], k=5).evidence
            print(json.dumps({"documents": [e.chunk.document for e in hits]}), flush=True)
        elif command == "ingest":
            report = service.ingest(sys.argv[1], [__import__("pathlib").Path(arg)])
            print(json.dumps({"statuses": [d.status for d in report.documents]}), flush=True)
        else:
            break
    service.close()
    """
)


class Resident:
    """A long-running kbbot-like process holding the store."""

    def __init__(self, settings: Settings, cwd: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-c", _RESIDENT, KB],
            env=child_env(settings),
            cwd=str(cwd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.read() == {"ready": True}

    def read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(30)
            pytest.fail(
                f"the resident process died (exit {self.process.returncode}): {self.process.stderr.read()[-3000:]}"
            )
        return json.loads(line)

    def ask(self, command: str) -> dict:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.read()

    def quit(self) -> None:
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        assert self.process.wait(60) == 0, self.process.stderr.read()[-3000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)
        self.process.stdout.close()
        self.process.stderr.close()
        self.process.stdin.close()


@pytest.fixture
def resident_factory() -> Iterator:
    started: list[Resident] = []

    def start(settings: Settings, cwd: Path) -> Resident:
        started.append(Resident(settings, cwd))
        return started[-1]

    yield start
    for resident in started:
        resident.stop()


def _doc(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {path.stem}\n\n{text}\n", encoding="utf-8")
    return path


def _fingerprint(settings: Settings) -> tuple[list, list]:
    """Registry rows and Chroma ids read with sqlite (no kbbot code, no lock, nothing recovered)."""

    def rows(path: Path, sql: str) -> list:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            return sorted(db.execute(sql).fetchall())
        finally:
            db.close()

    return (
        rows(
            settings.data_dir / "registry.sqlite3", "SELECT kb, name, state, live_version, live_chunks FROM documents"
        ),
        rows(settings.data_dir / "chroma" / "chroma.sqlite3", "SELECT embedding_id FROM embeddings"),
    )


def test_a_second_process_is_refused_the_embedded_store(make_settings, tmp_path: Path, resident_factory) -> None:
    kbs = tmp_path / "kbs"
    _doc(kbs / KB / "docs" / "declared.md", "Declared text about the loading dock.")
    (kbs / KB / "kb.toml").write_text(f'name = "{KB}"\ndescription = "Shared store test"\n', encoding="utf-8")
    settings = make_settings(KBBOT_KNOWLEDGE_BASES_DIR=kbs)
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "Shared store test")
        assert svc.ingest(KB, [_doc(tmp_path / "dock.md", "The loading dock opens at 06:00.")]).ok
    holder = resident_factory(settings, tmp_path)
    before = _fingerprint(settings)
    new = _doc(tmp_path / "gate.md", "Gate B closes at 22:00.")

    for args in (("ingest", "--kb", KB, str(new)), ("kb", "sync"), ("kb", "reindex", KB)):
        done = run_kbbot(settings, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, (args, done.stderr)
        message = lines[0]
        assert message.startswith(
            f"error: the data dir {settings.data_dir} is in use by another kbbot process (pid {holder.process.pid}"
        ), message
        assert "chroma run --path" in message and "CHROMA_HOST" in message, message
        figures.add("faults_survived")
    assert _fingerprint(settings) == before, "a refused command changed the store"

    # In this process too (the library, not only the CLI): a clear KnowledgeBaseError, nothing opened.
    with (
        KnowledgeService(settings.tools) as svc,
        pytest.raises(KnowledgeBaseError, match="in use by another kbbot process"),
    ):
        svc.store.live_chunks(KB)

    # Registry-only commands keep working while the holder runs.
    listed = {s["name"]: s for s in kb_list_json(settings)}
    assert (listed[KB]["documents"], listed[KB]["chunks"]) == (1, 1)

    # The holder still works, and once it is gone the store is free again.
    assert holder.ask("search loading dock")["documents"] == ["dock.md"]
    holder.quit()
    done = run_kbbot(settings, "ingest", "--kb", KB, str(new))
    assert done.returncode == 0, done.stderr
    with KnowledgeService(settings.tools) as svc:
        assert {c.document for c in svc.store.live_chunks(KB)} == {"dock.md", "gate.md"}
        assert_consistent(svc)


def test_kill_9_of_the_holder_frees_the_store(make_settings, tmp_path: Path, resident_factory) -> None:
    settings = make_settings()
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "Shared store test")
    holder = resident_factory(settings, tmp_path)
    with KnowledgeService(settings.tools) as svc, pytest.raises(KnowledgeBaseError, match=f"pid {holder.process.pid}"):
        svc.store.collection(KB)
    holder.process.kill()
    holder.process.wait(30)
    with KnowledgeService(settings.tools) as svc:  # the kernel dropped the dead holder's lock
        assert svc.store.collection(KB).count() == 0
    figures.add("faults_survived")


def test_processes_sharing_a_chroma_server_see_each_others_uploads(
    chroma_server, make_settings, tmp_path: Path, resident_factory
) -> None:
    settings = make_settings(CHROMA_HOST=chroma_server.host, CHROMA_PORT=chroma_server.port)
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "Shared store test")
        assert svc.ingest(KB, [_doc(tmp_path / "dock.md", "The loading dock opens at 06:00.")]).ok
    resident = resident_factory(settings, tmp_path)  # caches warm: dock.md only
    assert resident.ask("search loading dock")["documents"] == ["dock.md"]

    # Another process (the CLI) uploads: the running one finds it without a restart.
    done = run_kbbot(settings, "ingest", "--kb", KB, str(_doc(tmp_path / "gate.md", "Gate B closes at 22:00 sharp.")))
    assert done.returncode == 0, done.stderr
    assert resident.ask("search when does gate B close")["documents"][0] == "gate.md"

    # And the other way round: this process, warm before, sees what the resident uploads.
    from tools.search import HybridSearcher

    with KnowledgeService(settings.tools) as svc:
        searcher = HybridSearcher(svc.store, svc.embedder)
        assert searcher.search("loading dock", KB, k=3).evidence[0].chunk.document == "dock.md"
        path = _doc(tmp_path / "fuel.md", "The forklift fuel cage key hangs in locker 31.")
        assert resident.ask(f"ingest {path}") == {"statuses": ["ready"]}
        assert searcher.search("forklift fuel cage key", KB, k=3).evidence[0].chunk.document == "fuel.md"
        # A delete in one process is gone from the other's answers too.
        done = run_kbbot(settings, "kb", "delete-doc", "--kb", KB, "gate.md")
        assert done.returncode == 0, done.stderr
        assert "gate.md" not in [e.chunk.document for e in searcher.search("gate B close", KB, k=5).evidence]
        assert "gate.md" not in resident.ask("search when does gate B close")["documents"]
        assert_consistent(svc)
