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
    EvidenceNote,
    HomeView,
    IngestReport,
    KbView,
    Turn,
    Upload,
    shorten,
)
from bot.core.origin import Origin, Surface
from bot.core.traces import AnswerTrace, TracedRound

__all__ = [
    "FEEDBACK_REASONS",
    "SUPPORTED_SUFFIXES",
    "USER_ERRORS",
    "AccessDenied",
    "Answer",
    "AnswerTrace",
    "AskResult",
    "Citation",
    "DocView",
    "EmptyQuestion",
    "EvidenceNote",
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
    "TracedRound",
    "Turn",
    "Upload",
    "shorten",
]
