"""Fixtures for the application layer's tests: a `KnowledgeBot` over a private copy of the synced samples."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.membership import StaticMembership
from helpers.settings import build_settings

from bot.config import Settings


@pytest.fixture(scope="module")
def core_data_dir(synced_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("core") / "data"
    shutil.copytree(synced_data_dir, data_dir)
    return data_dir


@pytest.fixture(scope="module")
def core_settings(core_data_dir: Path) -> Settings:
    return build_settings(core_data_dir, KBBOT_ADMIN_USERS="U0ADMIN001")


@pytest.fixture(scope="module")
def membership() -> StaticMembership:
    return StaticMembership({"C0FINANCE1": {"U0CFO00001"}, "C0PEOPLE01": {"U0EMPLOY01"}})


@pytest.fixture(scope="module")
def kbbot(core_settings: Settings, membership: StaticMembership) -> Iterator:
    """Reads only (answers are recorded, nothing else changes): shared by a module's tests."""
    from bot.core import KnowledgeBot

    with KnowledgeBot(core_settings, membership=membership) as bot:
        yield bot
