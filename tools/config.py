"""What the tools layer needs to know, and nothing more: where data lives, which embedding model, which store.

`bot.config.Settings.tools` builds it from the environment; tools never read the environment or import `bot`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from tools.parsing import ParseLimits


@dataclass(frozen=True)
class ToolSettings:
    data_dir: Path
    knowledge_bases_dir: Path
    embedding_backend: Literal["local", "openai"] = "local"
    openai_embedding_model: str = "text-embedding-3-small"
    openai_api_key: SecretStr | None = field(default=None, repr=False)
    openai_base_url: str | None = None
    openai_timeout_s: float = 30.0
    chroma_host: str | None = None
    chroma_port: int = 8000
    max_upload_bytes: int = 25 * 1024 * 1024
    parse_limits: ParseLimits = field(default_factory=ParseLimits)

    @property
    def has_openai_key(self) -> bool:
        return bool(self.openai_api_key and self.openai_api_key.get_secret_value())

    @cached_property
    def resolved_data_dir(self) -> Path:
        path = self.data_dir.expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path
