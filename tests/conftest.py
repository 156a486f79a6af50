"""Shared fixtures for kbbot's tests.

Isolation first: nothing from the developer's shell or a `.env` file reaches a test. Every variable
Settings reads (OPENAI_API_KEY, SLACK_*, CHROMA_HOST, KBBOT_*...) is removed from the environment when
this module loads and again before each test, and `.env` loading is switched off for in-process
`load_settings()` calls. Tests that want a setting pass it explicitly (`make_settings(...)`) or set it
with `monkeypatch.setenv`.

Fixtures (all documented below):

- `make_settings(data_dir=None, **overrides)` → a Settings factory (overrides by env name or field name)
- `settings` / `service`       → an empty data dir under tmp_path, the repo's sample KBs declared
- `synced_data_dir` (session)  → the sample KBs synced ONCE per session by `kbbot kb sync` (~270 chunks)
- `sample_settings` / `sample_service` → a private copy of that synced store, per test (cheap)
- `sample_sync_json` (session)  → what that one `kbbot kb sync --json` printed
- `run_cli(settings, *args)`   → `kbbot ARGS` in-process: (exit code, stdout, stderr)

Subprocess runs of `kbbot` (with a clean environment) live in `helpers.cli`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.settings import build_settings, is_leaky, scrub_environ

from bot.config import Settings

# At import, so session-scoped fixtures are isolated too.
scrub_environ()
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without any kbbot/OpenAI/Slack/Chroma variable and without `.env` loading."""
    for name in [n for n in os.environ if is_leaky(n)]:
        monkeypatch.delenv(name)
    monkeypatch.setitem(Settings.model_config, "env_file", None)


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Factory: `make_settings(data_dir=None, **overrides)`; data_dir defaults to tmp_path/"data"."""

    def make(data_dir: Path | None = None, **overrides: object) -> Settings:
        return build_settings(data_dir or tmp_path / "data", **overrides)

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    """An empty data dir (tmp_path/"data"); the repo's knowledge_bases/ declared; no keys; local Chroma."""
    return make_settings()


@pytest.fixture
def service(settings: Settings) -> Iterator:
    """A KnowledgeService over `settings` (nothing ingested yet); closed after the test."""
    from tools.service import KnowledgeService

    with KnowledgeService(settings.tools) as svc:
        yield svc


@pytest.fixture(scope="session")
def _sample_sync(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """`kbbot kb sync --json` on the repo's sample KBs, run once, in this process (the model stays loaded)."""
    from helpers.cli import settings_env

    from bot.cli import main

    data_dir = tmp_path_factory.mktemp("sample-sync") / "data"
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(Settings.model_config, "env_file", None)
        for name, value in settings_env(build_settings(data_dir)).items():
            patch.setenv(name, value)
        with contextlib.redirect_stdout(out):
            code = main(["kb", "sync", "--json"])
    result = json.loads(out.getvalue())
    failed = [d for kb in result["kbs"] for d in kb["documents"] if d["status"] != "ready"]
    assert code == 0 and not failed, f"the sample KBs must sync cleanly: {failed}"
    return data_dir, result


@pytest.fixture(scope="session")
def synced_data_dir(_sample_sync: tuple[Path, dict]) -> Path:
    """A data dir holding the repo's sample KBs, synced once per session. Treat as read-only:
    copy it (or use `sample_settings`/`sample_service`) before changing anything."""
    return _sample_sync[0]


@pytest.fixture(scope="session")
def sample_sync_json(_sample_sync: tuple[Path, dict]) -> dict:
    """What that one `kbbot kb sync --json` printed: {"kbs": [ingest reports], "embedded_chunks": int}."""
    return _sample_sync[1]


@pytest.fixture
def sample_settings(synced_data_dir: Path, tmp_path: Path, make_settings: Callable[..., Settings]) -> Settings:
    """Settings over a private copy (tmp_path/"sample-data") of the synced sample store."""
    data_dir = tmp_path / "sample-data"
    shutil.copytree(synced_data_dir, data_dir)
    return make_settings(data_dir)


@pytest.fixture
def sample_service(sample_settings: Settings) -> Iterator:
    """A KnowledgeService over the private synced copy: search/answer/mutate freely."""
    from tools.service import KnowledgeService

    with KnowledgeService(sample_settings.tools) as svc:
        yield svc


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> Callable[..., CliResult]:
    """`run_cli(settings, *args)`: `kbbot ARGS` in this process (bot.cli.main), env built from settings.

    The process surviving the call is part of what is tested: main() must return, not raise.
    """
    from helpers.cli import settings_env

    from bot.cli import main

    def run(settings: Settings, *args: str) -> CliResult:
        for name in [n for n in os.environ if is_leaky(n)]:
            monkeypatch.delenv(name)
        for name, value in settings_env(settings).items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()  # drop anything printed before
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001 - pytest's hook signature
    """The reliability suite's one line of figures (tests/helpers/figures.py), when any of it ran."""
    from helpers import figures

    if figures.touched():
        terminalreporter.write_line(figures.line())
