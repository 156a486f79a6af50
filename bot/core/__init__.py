"""The application layer: one façade (`KnowledgeBot`), where requests come from (`Origin`), and the rules."""

from bot.core.bot import KnowledgeBot
from bot.core.errors import USER_ERRORS, AccessDenied, EmptyQuestion, KnowledgeBaseError, NotAllowedHere, NotFound
from bot.core.models import (
    SUPPORTED_SUFFIXES,
    Answer,
    AskResult,
    ChannelKb,
    ChannelView,
    Citation,
    DocView,
    IngestReport,
    KbView,
    Turn,
    Upload,
    shorten,
)
from bot.core.origin import Origin, Surface

__all__ = [
    "SUPPORTED_SUFFIXES",
    "USER_ERRORS",
    "AccessDenied",
    "Answer",
    "AskResult",
    "ChannelKb",
    "ChannelView",
    "Citation",
    "DocView",
    "EmptyQuestion",
    "IngestReport",
    "KbView",
    "KnowledgeBaseError",
    "KnowledgeBot",
    "NotAllowedHere",
    "NotFound",
    "Origin",
    "Surface",
    "Turn",
    "Upload",
    "shorten",
]
