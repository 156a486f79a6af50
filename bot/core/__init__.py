"""The application layer: one façade (`KnowledgeBot`), where requests come from (`Origin`), and the rules."""

from bot.core.bot import KnowledgeBot
from bot.core.errors import USER_ERRORS, AccessDenied, EmptyQuestion, KnowledgeBaseError, NotFound
from bot.core.gaps import FEEDBACK_REASONS, Gap, GapsReport
from bot.core.models import (
    SUPPORTED_SUFFIXES,
    Answer,
    AskResult,
    Citation,
    DocView,
    HomeView,
    IngestReport,
    KbView,
    Turn,
    Upload,
    shorten,
)
from bot.core.origin import Origin, Surface

__all__ = [
    "FEEDBACK_REASONS",
    "SUPPORTED_SUFFIXES",
    "USER_ERRORS",
    "AccessDenied",
    "Answer",
    "AskResult",
    "Citation",
    "DocView",
    "EmptyQuestion",
    "Gap",
    "GapsReport",
    "HomeView",
    "IngestReport",
    "KbView",
    "KnowledgeBaseError",
    "KnowledgeBot",
    "NotFound",
    "Origin",
    "Surface",
    "Turn",
    "Upload",
    "shorten",
]
