"""The layer contract (pyproject.toml, `lint-imports` in `make test`) holds, and it bites when broken."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import REPO_ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": str(LINT_IMPORTS.parent), "PYTHONPATH": str(root)},
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the contract, to break."""
    for part in ("bot", "tools"):
        shutil.copytree(REPO_ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_layers_hold(tree: Path):
    done = lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("tools/text.py", "import bot.config"),  # the lower layer reaching up
        ("bot/slack/markup.py", "from tools import text"),  # a surface reaching past the application layer
        ("bot/console.py", "from bot.agent import engine"),
        ("bot/agent/routing.py", "from bot.core import origin"),  # the engine importing the layer above it
    ],
)
def test_a_broken_layer_fails_the_build(tree: Path, module: str, line: str):
    with (tree / module).open("a", encoding="utf-8") as handle:
        handle.write(f"\n{line}  # the violation\n")
    done = lint(tree)
    assert done.returncode != 0 and "BROKEN" in done.stdout, done.stdout
