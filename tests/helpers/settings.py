"""Settings for tests, isolated from the developer's shell and `.env` files."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bot.config import REPO_ROOT, Settings
from tools.onnx_export import recipes_digest

SAMPLE_KBS_DIR = REPO_ROOT / "knowledge_bases"
# ONNX exports of the local model, shared by every test and test process on this machine: exporting
# takes tens of seconds, and each load verifies the file's hash, so sharing them is safe. One folder per
# export recipe, so checkouts with different recipes do not re-export over each other's files.
TEST_MODEL_CACHE = Path(tempfile.gettempdir()) / f"kbbot-test-models-{recipes_digest()}"

# Every environment name Settings reads, plus whole families that must never leak into tests.
_SETTINGS_ENV_NAMES = {(f.alias or n).upper() for n, f in Settings.model_fields.items()}
_LEAKY_PREFIXES = ("KBBOT_", "OPENAI_", "SLACK_", "CHROMA_")


def is_leaky(name: str) -> bool:
    upper = name.upper()  # pydantic-settings matches names case-insensitively
    return upper in _SETTINGS_ENV_NAMES or upper.startswith(_LEAKY_PREFIXES)


def scrub_environ() -> None:
    """Remove every kbbot/OpenAI/Slack/Chroma variable from this process's environment."""
    for name in [n for n in os.environ if is_leaky(n)]:
        del os.environ[name]


def build_settings(data_dir: Path, **overrides: object) -> Settings:
    """Settings for a test: the given data dir, the repo's sample KBs declared, no keys, no server.

    `overrides` use the environment names (KBBOT_MAX_UPLOAD_MB=1) or the field names (max_upload_mb=1).
    """
    values: dict[str, object] = {
        "KBBOT_DATA_DIR": data_dir,
        "KBBOT_KNOWLEDGE_BASES_DIR": SAMPLE_KBS_DIR,
        "KBBOT_MODEL_CACHE_DIR": TEST_MODEL_CACHE,
        "OPENAI_API_KEY": None,
        "OPENAI_BASE_URL": None,
        "CHROMA_HOST": None,
        "SLACK_BOT_TOKEN": None,
        "SLACK_APP_TOKEN": None,
        "SLACK_SIGNING_SECRET": None,
        "SLACK_API_URL": None,
    }
    aliases = {n: (f.alias or n) for n, f in Settings.model_fields.items()}
    for key, value in overrides.items():
        values[aliases.get(key, key)] = value
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]
