"""What the tools layer needs to know, and nothing more: where data lives, which embedding model, which store.

`bot.config.Settings.tools` builds it from the environment; tools never read the environment or import `bot`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from tools.chunking import CHUNK_OVERLAP_TOKENS, CHUNK_TOKENS
from tools.parsing import ParseLimits

LocalRuntime = Literal["torch", "onnx", "onnx-int8", "openvino"]


@dataclass(frozen=True)
class ToolSettings:
    data_dir: Path
    knowledge_bases_dir: Path
    embedding_backend: Literal["local", "openai"] = "local"
    # How the local MiniLM runs: PyTorch via sentence-transformers, or ONNX Runtime / OpenVINO on a locally exported
    # copy.
    local_runtime: LocalRuntime = "openvino"
    # Where the ONNX exports of the local model are kept; None = the data dir's models/.
    model_cache_dir: Path | None = None
    openai_embedding_model: str = "text-embedding-3-small"
    openai_api_key: SecretStr | None = field(default=None, repr=False)
    openai_base_url: str | None = None
    openai_timeout_s: float = 30.0
    chroma_host: str | None = None
    chroma_port: int = 8000
    max_upload_bytes: int = 25 * 1024 * 1024
    parse_limits: ParseLimits = field(default_factory=ParseLimits)
    # Word pieces per chunk and shared by neighbouring chunks (tools.chunking.ChunkWindow checks them).
    chunk_tokens: int = CHUNK_TOKENS
    chunk_overlap_tokens: int = CHUNK_OVERLAP_TOKENS

    @property
    def has_openai_key(self) -> bool:
        return bool(self.openai_api_key and self.openai_api_key.get_secret_value())

    @cached_property
    def resolved_data_dir(self) -> Path:
        path = self.data_dir.expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def resolved_model_cache_dir(self) -> Path:
        if self.model_cache_dir is not None:
            return self.model_cache_dir.expanduser().resolve()
        return self.resolved_data_dir / "models"
