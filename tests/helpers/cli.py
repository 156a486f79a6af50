"""Run `kbbot` the way people do: as a separate process, with an environment built from Settings.

Nothing from the developer's shell leaks in: the child gets a minimal environment (PATH, HOME, locale,
temp dir) plus exactly the settings given, and runs in a directory of the test's choosing so no `.env`
file is picked up by accident.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pydantic import SecretStr

from bot.config import REPO_ROOT, Settings

# Variables a child process may inherit: the rest (API keys, Slack tokens, CHROMA_HOST...) stay out.
_PASS_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "PYTHONHASHSEED")


def kbbot_command() -> list[str]:
    """The `kbbot` console script of this interpreter's venv (falls back to `python -m bot.cli`)."""
    script = Path(sys.executable).with_name("kbbot")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "bot.cli"]


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment variables that reproduce `settings` in another process."""
    env: dict[str, str] = {}
    for name, field in Settings.model_fields.items():
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        env[field.alias or name.upper()] = str(value)
    return env


def child_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _PASS_THROUGH}
    env.update(settings_env(settings))
    # The child runs the code of this checkout (a git worktree included), not whatever the venv's
    # editable install points at.
    env.update({"TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO_ROOT)})
    env.update(extra)
    return env


def run_kbbot(
    settings: Settings, *args: str, cwd: Path | None = None, timeout: float = 180, **extra_env: str
) -> subprocess.CompletedProcess:
    """Run `kbbot ARGS...` to completion; stdout/stderr captured as text."""
    return subprocess.run(
        [*kbbot_command(), *args],
        env=child_env(settings, **extra_env),
        cwd=str(cwd or settings.data_dir.parent),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def spawn_kbbot(settings: Settings, *args: str, cwd: Path | None = None, **extra_env: str) -> subprocess.Popen:
    """Start `kbbot ARGS...` without waiting (e.g. to kill it mid-ingest)."""
    return subprocess.Popen(
        [*kbbot_command(), *args],
        env=child_env(settings, **extra_env),
        cwd=str(cwd or settings.data_dir.parent),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kb_list_json(settings: Settings) -> list[dict]:
    """`kbbot kb list --json` in a fresh process, parsed."""
    done = run_kbbot(settings, "kb", "list", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
