"""The errors a surface shows people: each message says what is wrong and what to do."""

from __future__ import annotations

from bot.agent.models import EmptyQuestion
from tools.embeddings import EmbeddingError
from tools.manifests import ManifestError
from tools.store import KnowledgeBaseError


class NotFound(KnowledgeBaseError):
    """No such KB or document — or none this origin may know of (the two look the same from outside)."""


class AccessDenied(KnowledgeBaseError):
    """The origin may see the KB but not change it."""

    def __init__(self, message: str, uploaders: tuple[str, ...] = ()):
        super().__init__(message)
        self.uploaders = uploaders


class NotAllowedHere(AccessDenied):
    """The KB's access rules (kb.toml) do not allow it where this change would put it."""


# What a surface reports in one line (no traceback); anything else is a bug.
USER_ERRORS: tuple[type[Exception], ...] = (KnowledgeBaseError, ManifestError, EmbeddingError, EmptyQuestion)

__all__ = ["USER_ERRORS", "AccessDenied", "EmptyQuestion", "NotAllowedHere", "KnowledgeBaseError", "NotFound"]
