"""The fixed texts kbbot says itself, in the question's language (English and Chinese)."""

from __future__ import annotations

import re

from tools.text import has_cjk


def language_of(text: str) -> str:
    return "zh" if has_cjk(text) else "en"


_REFUSAL_START = {"en": "I couldn't find enough in the knowledge bases", "zh": "我在已搜索的知识库"}
_NO_KNOWLEDGE_BASE = {"en": "There is no knowledge base I may search here.", "zh": "这里没有我可以搜索的知识库。"}


# The one reason a Chinese reply can name in Chinese: what the documents never mention (grading's wording), and
# what they name instead.
_NEVER_MENTIONS = re.compile(r"never mentions (?P<missing>.+?)(?:; it names (?P<named>.+))?$")


def insufficient_context(language: str, searched: list[str], reason: str) -> str:
    kbs = ", ".join(searched) if searched else "none"
    if language == "zh":
        said = _NEVER_MENTIONS.search(reason)
        why = ""
        if said:
            why = f"文档中没有提到“{said.group('missing').replace(', ', '、')}”"
            why += f"（只提到 {said.group('named')}）" if said.group("named") else ""
            why += "。"
        return (
            f"{_REFUSAL_START['zh']}（{kbs}）中没有找到足够的信息来回答这个问题。{why}"
            "可以换个更具体的说法再问，或请负责人用 /kb upload 上传涵盖此内容的文档。"
        )
    return (
        f"{_REFUSAL_START['en']} I searched ({kbs}) to answer this — {reason}. "
        "Try rephrasing with more specific terms, or ask a KB owner to upload a document that covers it "
        "(/kb upload)."
    )


def no_knowledge_base(language: str) -> str:
    return _NO_KNOWLEDGE_BASE["zh" if language == "zh" else "en"]


def is_fixed_reply(text: str) -> bool:
    """Whether a message is one of kbbot's refusals (they say nothing about a thread's subject)."""
    return text.startswith((*_REFUSAL_START.values(), *_NO_KNOWLEDGE_BASE.values()))


def truncated_note(limit: int) -> str:
    return f"question truncated to its first {limit} characters"
