"""Starting kbbot: what `make run` runs (`kbbot start --sync`), and what a sync with nothing to do leaves unloaded.

A sync where no document changed must not load the embedding model (nor torch, sentence-transformers or all of
llama-index: seconds of a start), and the console shows its prompt while the model and the indexes load on a
thread; the first question waits for them, with a line saying so. The embedding endpoint of these tests is the
fake on 127.0.0.1 (helpers/fake_embeddings), which can hold the warm-up's request: the warm-up is then provably
still running when the question arrives.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cli import child_env, kbbot_command, run_kbbot
from helpers.fake_embeddings import FakeEmbeddings

from bot.config import Settings

MODEL_LOADED = "loading the embedding model"
HEAVY_MODULES = ("torch", "sentence_transformers", "llama_index.core", "transformers")
WARM_UP_QUESTION = "warm-up: what is in the knowledge base?"  # KnowledgeBot.warm_up's

# `kbbot ARGS` in a child process that then reports which heavy modules it imported (last line of stderr).
_REPORTING_MODULES = (
    "import json, sys\n"
    "from bot.cli import main\n"
    "code = main(sys.argv[1:])\n"
    f"print(json.dumps({{m: m in sys.modules for m in {HEAVY_MODULES!r}}}), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _kbbot_reporting_modules(settings: Settings, *args: str, **extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run(
        [sys.executable, "-c", _REPORTING_MODULES, *args],
        env=child_env(settings, **extra),
        cwd=str(settings.data_dir.parent),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done, json.loads(done.stderr.strip().splitlines()[-1])


@pytest.fixture
def fake_embeddings() -> Iterator[FakeEmbeddings]:
    fake = FakeEmbeddings().start()
    yield fake
    fake.stop()


@pytest.fixture
def tiny_kbs(tmp_path: Path) -> Path:
    """One declared KB of two short documents."""
    root = tmp_path / "kbs"
    docs = root / "handbook" / "docs"
    docs.mkdir(parents=True)
    (root / "handbook" / "kb.toml").write_text(
        'name = "handbook"\ndescription = "Office handbook: vacation, badges, parking"\nvisibility = "public"\n',
        encoding="utf-8",
    )
    (docs / "vacation.md").write_text(
        "# Vacation\n\nEvery employee gets 25 vacation days per year. Unused vacation days expire in March.\n",
        encoding="utf-8",
    )
    (docs / "badges.md").write_text(
        "# Badges\n\nA lost badge is replaced at the front desk within one working day.\n", encoding="utf-8"
    )
    return root


def test_sync_with_nothing_changed_loads_no_model(sample_settings: Settings, tmp_path: Path, make_settings):
    """The sample KBs as `make run` leaves them (local MiniLM): syncing again embeds nothing and imports none of
    torch, sentence-transformers or llama-index; once a document changed, the model is loaded to embed it."""
    done, imported = _kbbot_reporting_modules(sample_settings, "-v", "kb", "sync", "--json")
    report = json.loads(done.stdout)
    assert report["embedded_chunks"] == 0
    assert {d["status"] for kb in report["kbs"] for d in kb["documents"]} == {"unchanged"}
    assert MODEL_LOADED not in done.stderr
    assert not any(imported.values()), f"a sync with nothing to do imported {imported}"

    kbs = tmp_path / "knowledge_bases"
    shutil.copytree(sample_settings.knowledge_bases_dir, kbs)
    changed = next((kbs / "people" / "docs").glob("*.md"))
    changed.write_text(changed.read_text(encoding="utf-8") + "\nBadges are renewed every two years.\n", "utf-8")
    done, _ = _kbbot_reporting_modules(
        make_settings(sample_settings.data_dir, knowledge_bases_dir=kbs), "-v", "kb", "sync", "--json"
    )
    report = json.loads(done.stdout)
    assert report["embedded_chunks"] > 0
    assert [d["document"] for kb in report["kbs"] for d in kb["documents"] if d["status"] == "ready"] == [changed.name]
    assert MODEL_LOADED in done.stderr


class Console:
    """`kbbot ARGS` with a pipe for stdin; its stdout read on a thread, so a test can wait for a piece of text."""

    def __init__(self, settings: Settings, *args: str, **extra: str):
        self.process = subprocess.Popen(
            [*kbbot_command(), *args],
            env=child_env(settings, **extra),
            cwd=str(settings.data_dir.parent),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.out = ""
        self._chunks: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while chunk := self.process.stdout.read(1):
            self._chunks.put(chunk)
        self._chunks.put("")

    def wait_for(self, text: str, after: int = 0, timeout: float = 120) -> int:
        """Read until `text` appears at or after offset `after`; where it ends."""
        while (found := self.out.find(text, after)) < 0:
            try:
                chunk = self._chunks.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {text!r}; output so far:\n{self.out}") from None
            if not chunk:
                raise AssertionError(f"exited before {text!r}:\n{self.out}\n{self.process.stderr.read()}")
            self.out += chunk
        return found + len(text)

    def send(self, line: str) -> None:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)


def _wait_for_file(path: Path, console: Console) -> None:
    import time

    for _ in range(1200):
        if path.exists():
            return
        assert console.process.poll() is None, console.process.stderr.read()
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared: the warm-up never embedded its question")


def _console_held_in_its_warm_up(
    command: str, make_settings, tiny_kbs: Path, fake_embeddings: FakeEmbeddings, tmp_path: Path
) -> tuple[Console, Path]:
    """A synced console (`kbbot start` or `chat`) whose warm-up question the fake embeddings hold; `held`
    appears once the warm-up is inside that embedding."""
    settings = make_settings(knowledge_bases_dir=tiny_kbs)
    endpoint = fake_embeddings.settings()
    assert run_kbbot(settings, "kb", "sync", **endpoint).returncode == 0
    held = tmp_path / "warm-up-held"
    fake_embeddings.hold_on(WARM_UP_QUESTION, held)
    return Console(settings, command, **endpoint), held


def test_the_prompt_comes_before_the_model_and_the_first_question_waits_for_it(
    make_settings, tiny_kbs: Path, fake_embeddings: FakeEmbeddings, tmp_path: Path
):
    console, held = _console_held_in_its_warm_up("start", make_settings, tiny_kbs, fake_embeddings, tmp_path)
    try:
        prompt = console.wait_for("you> ")
        _wait_for_file(held, console)  # the warm-up is inside its first embedding, and stays there
        console.send("How many vacation days do employees get?")
        waiting = console.wait_for("(loading the model and the knowledge bases…)", prompt)
        assert "kbbot> " not in console.out, "no answer while the warm-up holds"
        fake_embeddings.release()
        answered = console.wait_for("kbbot> ", waiting)
        console.wait_for("you> ", answered)
        assert "25 vacation days" in console.out[answered:] and "[1]" in console.out[answered:]

        console.send("/kbs")  # a second question no longer waits: the loading line is printed once
        console.send("Where is a lost badge replaced?")
        second = console.wait_for("kbbot> ", answered)
        console.wait_for("you> ", second)
        console.send("quit")
        assert console.process.wait(60) == 0
        assert console.out.count("(loading the model") == 1
        assert "front desk" in console.out[second:]
    finally:
        console.close()


def test_quitting_while_the_model_still_loads_exits_at_once_and_cleanly(
    make_settings, tiny_kbs: Path, fake_embeddings: FakeEmbeddings, tmp_path: Path
):
    console, held = _console_held_in_its_warm_up("chat", make_settings, tiny_kbs, fake_embeddings, tmp_path)
    try:
        console.wait_for("you> ")
        _wait_for_file(held, console)
        console.process.stdin.close()  # end of input (Ctrl-D, or `printf 'quit\n' | make run` after its line)
        assert console.process.wait(60) == 0
        assert "Traceback" not in console.process.stderr.read()
    finally:
        console.close()


def test_start_sync_syncs_then_chats_in_one_process(
    make_settings, tiny_kbs: Path, fake_embeddings: FakeEmbeddings, tmp_path: Path
):
    settings = make_settings(knowledge_bases_dir=tiny_kbs)
    endpoint = fake_embeddings.settings()
    console = Console(settings, "start", "--sync", **endpoint)
    try:
        prompt = console.wait_for("you> ")
        before_prompt = console.out[:prompt]
        assert "✓ handbook/vacation.md" in before_prompt and "handbook: 2 ok, 0 failed" in before_prompt
        console.send("How many vacation days do employees get?")
        answered = console.wait_for("kbbot> ", prompt)
        console.wait_for("you> ", answered)
        assert "25 vacation days" in console.out[answered:]
        console.send("exit")
        assert console.process.wait(60) == 0
    finally:
        console.close()

    (tiny_kbs / "handbook" / "docs" / "badges.md").unlink()
    (tiny_kbs / "handbook" / "docs" / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    again = Console(settings, "start", "--sync", **endpoint)
    try:
        prompt = again.wait_for("you> ")
        assert "removed: its file is no longer in docs/" in again.out[:prompt]
        assert "handbook/broken.pdf" in again.out[:prompt], "a document that fails is reported, and the chat starts"
        again.send("quit")
        assert again.process.wait(60) == 0
        assert "starting without them" in again.process.stderr.read()
    finally:
        again.close()
