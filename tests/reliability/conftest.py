"""Fixtures of the reliability suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.chroma_server import ChromaServer
from helpers.cli import child_env


@pytest.fixture
def chroma_server(tmp_path: Path, make_settings) -> Iterator[ChromaServer]:
    """A real `chroma run` on a free port, answering before the test starts; always stopped."""
    server = ChromaServer(tmp_path / "chroma-server", tmp_path / "chroma.log", child_env(make_settings()))
    try:
        yield server.start()
    finally:
        server.stop()
