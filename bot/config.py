"""Settings from the environment (and an optional `.env` file)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tools.chunking import CHUNK_OVERLAP_TOKENS, CHUNK_TOKENS, ChunkWindow
from tools.config import LocalRuntime, ToolSettings
from tools.parsing import ParseLimits

REPO_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True)

    data_dir: Path = Field(Path(".kbbot"), alias="KBBOT_DATA_DIR")
    knowledge_bases_dir: Path = Field(REPO_ROOT / "knowledge_bases", alias="KBBOT_KNOWLEDGE_BASES_DIR")

    embedding_backend: Literal["local", "openai"] = Field("local", alias="KBBOT_EMBEDDING_BACKEND")
    openai_embedding_model: str = Field("text-embedding-3-small", alias="KBBOT_OPENAI_EMBEDDING_MODEL")
    local_runtime: LocalRuntime = Field("openvino", alias="KBBOT_LOCAL_RUNTIME")
    model_cache_dir: Path | None = Field(None, alias="KBBOT_MODEL_CACHE_DIR")

    openai_api_key: SecretStr | None = Field(None, alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(None, alias="OPENAI_BASE_URL")
    chat_model: str = Field("gpt-4o-mini", alias="KBBOT_CHAT_MODEL")
    llm_timeout_s: float = Field(30.0, alias="KBBOT_LLM_TIMEOUT")
    question_deadline_s: float = Field(60.0, alias="KBBOT_QUESTION_DEADLINE", gt=0)

    chroma_host: str | None = Field(None, alias="CHROMA_HOST")
    chroma_port: int = Field(8000, alias="CHROMA_PORT")

    slack_bot_token: SecretStr | None = Field(None, alias="SLACK_BOT_TOKEN")
    slack_app_token: SecretStr | None = Field(None, alias="SLACK_APP_TOKEN")
    slack_signing_secret: SecretStr | None = Field(None, alias="SLACK_SIGNING_SECRET")
    slack_api_url: str | None = Field(None, alias="SLACK_API_URL")
    port: int = Field(3000, alias="PORT")
    slack_workers: int = Field(8, alias="KBBOT_SLACK_WORKERS", ge=1, le=64)
    slack_queue: int = Field(100, alias="KBBOT_SLACK_QUEUE", ge=1)
    slack_ingest_workers: int = Field(2, alias="KBBOT_SLACK_INGEST_WORKERS", ge=1, le=16)
    slack_streaming: bool = Field(True, alias="KBBOT_SLACK_STREAMING")
    slack_warmup: bool = Field(True, alias="KBBOT_SLACK_WARMUP")
    # Questions answered in this many worker processes (bot/core/answer_processes.py); 0: in `kbbot serve` itself.
    answer_processes: int = Field(0, alias="KBBOT_ANSWER_PROCESSES", ge=0, le=16)
    shutdown_grace_s: float = Field(30.0, alias="KBBOT_SHUTDOWN_GRACE", ge=0)

    admin_users: str = Field("", alias="KBBOT_ADMIN_USERS")
    max_upload_mb: float = Field(25.0, alias="KBBOT_MAX_UPLOAD_MB")
    # A cited document whose live version is older than this is marked "possibly outdated" in Sources.
    stale_after_days: float = Field(365.0, alias="KBBOT_STALE_AFTER_DAYS", gt=0)
    # What parsing one file may cost (tools.parsing.ParseLimits; a file over a limit is refused, naming it).
    max_pdf_pages: int = Field(2000, alias="KBBOT_MAX_PDF_PAGES", ge=1)
    parse_timeout_s: float = Field(60.0, alias="KBBOT_PARSE_TIMEOUT_S", gt=0)
    parse_max_memory_mb: int = Field(2048, alias="KBBOT_PARSE_MAX_MEMORY_MB", ge=256)
    max_inflated_mb: float = Field(100.0, alias="KBBOT_MAX_INFLATED_MB", gt=0)
    max_nesting_depth: int = Field(256, alias="KBBOT_MAX_NESTING_DEPTH", ge=16)
    max_document_chars: int = Field(5_000_000, alias="KBBOT_MAX_DOCUMENT_CHARS", ge=1000)
    # The chunk window (tools.chunking.ChunkWindow): changing it re-ingests each document at its next ingest.
    chunk_tokens: int = Field(CHUNK_TOKENS, alias="KBBOT_CHUNK_TOKENS", le=8192)
    chunk_overlap_tokens: int = Field(CHUNK_OVERLAP_TOKENS, alias="KBBOT_CHUNK_OVERLAP_TOKENS")

    @model_validator(mode="after")
    def _a_window_chunking_accepts(self) -> Settings:
        try:  # the rule lives in ChunkWindow; here its message gets the variables' names
            ChunkWindow(self.chunk_tokens, self.chunk_overlap_tokens)
        except ValueError as exc:
            raise ValueError(f"KBBOT_CHUNK_TOKENS / KBBOT_CHUNK_OVERLAP_TOKENS: {exc}") from exc
        return self

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def admin_user_ids(self) -> tuple[str, ...]:
        """Slack users who may upload to and delete from every KB (comma-separated)."""
        return tuple(u.strip() for u in self.admin_users.split(",") if u.strip())

    @property
    def llm_enabled(self) -> bool:
        return bool(self.openai_api_key and self.openai_api_key.get_secret_value())

    @property
    def slack_enabled(self) -> bool:
        return bool(self.slack_bot_token and self.slack_bot_token.get_secret_value())

    @cached_property
    def resolved_data_dir(self) -> Path:
        return self.tools.resolved_data_dir

    @cached_property
    def tools(self) -> ToolSettings:
        """What the tools layer needs (it reads no environment of its own)."""
        return ToolSettings(
            data_dir=self.data_dir,
            knowledge_bases_dir=self.knowledge_bases_dir,
            embedding_backend=self.embedding_backend,
            local_runtime=self.local_runtime,
            model_cache_dir=self.model_cache_dir,
            openai_embedding_model=self.openai_embedding_model,
            openai_api_key=self.openai_api_key,
            openai_base_url=self.openai_base_url,
            openai_timeout_s=self.llm_timeout_s,
            chroma_host=self.chroma_host,
            chroma_port=self.chroma_port,
            max_upload_bytes=self.max_upload_bytes,
            chunk_tokens=self.chunk_tokens,
            chunk_overlap_tokens=self.chunk_overlap_tokens,
            parse_limits=ParseLimits(
                max_pdf_pages=self.max_pdf_pages,
                timeout_s=self.parse_timeout_s,
                max_memory_mb=self.parse_max_memory_mb,
                max_inflated_mb=self.max_inflated_mb,
                max_nesting_depth=self.max_nesting_depth,
                max_chars=self.max_document_chars,
            ),
        )


def load_settings(**overrides: object) -> Settings:
    return Settings(**overrides)  # type: ignore[arg-type]


def describe_settings_error(error: ValidationError) -> str:
    """One line per bad setting, by its environment name, without pydantic's internals."""
    problems = []
    for item in error.errors():
        name = ".".join(str(part) for part in item.get("loc", ())) or "a setting"
        problems.append(f"{name}: {item.get('msg', 'invalid value')}")
    return "invalid setting " + "; ".join(problems)
