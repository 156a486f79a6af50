"""Language-aware text helpers shared by keyword search, chunking and answering."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:['’][^\W_]+)?", re.UNICODE)
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")
_HAS_CJK = re.compile(rf"[{_CJK}]")
_CJK_CHAR = _HAS_CJK

# Bump when keyword_terms changes: saved keyword indexes of another version are rebuilt.
TOKENIZER_VERSION = "1"

# A compact English stop list: words that carry no retrieval signal in questions.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "don",
        "doesn",
        "didn",
        "isn",
        "aren",
        "wasn",
        "weren",
        "won",
        "wouldn",
        "shouldn",
        "couldn",
        "hasn",
        "haven",
        "hadn",
        "let",
        "us",
        "also",
        "may",
        "might",
        "must",
        "shall",
        "get",
        "got",
        "tell",
        "know",
        "please",
        "thanks",
        "thank",
        "hi",
        "hello",
        "hey",
    ]
)
CJK_STOPWORDS = frozenset(
    [
        "的",
        "了",
        "是",
        "在",
        "吗",
        "呢",
        "吧",
        "啊",
        "和",
        "与",
        "我",
        "你",
        "他",
        "她",
        "它",
        "们",
        "这",
        "那",
        "有",
        "就",
        "也",
        "都",
        "要",
        "会",
        "怎么",
        "什么",
        "多少",
        "如何",
    ]
)


def has_cjk(text: str) -> bool:
    return bool(_HAS_CJK.search(text))


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def raw_tokens(text: str) -> list[str]:
    """Lower-cased word tokens; CJK runs kept whole (split later)."""
    return _TOKEN.findall(text.lower())


def keyword_terms(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Index/query terms: stemmed English words without stopwords; CJK as character bigrams.

    Bigrams let Chinese text match without a segmenter: 报销政策 → 报销 销政 政策.
    """
    terms: list[str] = []
    words: list[str] = []
    for token in raw_tokens(text):
        if _CJK_RUN.match(token):
            if len(token) == 1:
                if token not in CJK_STOPWORDS:
                    terms.append(token)
            else:
                terms.extend(token[i : i + 2] for i in range(len(token) - 1))
        elif keep_stopwords or token not in STOPWORDS:
            words.append(token)
    if words:
        terms.extend(_stemmer().stemWords(words))
    return terms


def content_terms(text: str) -> set[str]:
    """The set of meaningful terms of a text, for coverage/overlap measures."""
    return {t for t in keyword_terms(text) if len(t) > 1 or has_cjk(t)}


# Identifiers: error codes, config keys, plan and form names, versions ("unroutable_address", "SEV1",
# "401k", "v4.12.0"). Written in a question, they must appear in the answer's source as written;
# punctuation inside may differ ("401(k)" is "401k").
_IDENTIFIER = re.compile(r"(?<![\w.-])[A-Za-z0-9](?:[\w.:/()-]*[A-Za-z0-9])?")
_IDENTIFIER_PART = re.compile(r"[A-Za-z]+|\d+")
_ORDINAL_OR_DECADE = re.compile(r"^\d+(?:st|nd|rd|th|s)$", re.I)  # "3rd", "1990s": words, not names


def identifiers(text: str) -> list[str]:
    """Tokens that name something exactly: letters mixed with digits, or words joined by underscores."""
    found: dict[str, None] = {}
    for token in _IDENTIFIER.findall(text):
        has_digit, has_letter = any(c.isdigit() for c in token), any(c.isalpha() for c in token)
        if has_letter and (has_digit or "_" in token) and not _ORDINAL_OR_DECADE.match(token):
            found.setdefault(token, None)
    return list(found)


@lru_cache(maxsize=1024)
def _identifier_pattern(identifier: str) -> re.Pattern[str]:
    parts = _IDENTIFIER_PART.findall(identifier)
    return re.compile(r"(?<![A-Za-z0-9_])" + r"[\W_]{0,2}".join(map(re.escape, parts)) + r"(?![A-Za-z0-9_])", re.I)


def mentions(text: str, identifier: str) -> bool:
    """Whether `text` names `identifier`, ignoring case and up to two punctuation marks between its parts."""
    return bool(_identifier_pattern(identifier).search(text))


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？；])|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence or list item in `text`, surrounding whitespace excluded."""
    spans = []
    start = 0
    for boundary in [*_SENTENCE_END.finditer(text), None]:
        end = boundary.start() if boundary else len(text)
        piece = text[start:end]
        stripped = piece.strip()
        if stripped and any(ch.isalnum() for ch in stripped):
            left = start + len(piece) - len(piece.lstrip())
            spans.append((left, left + len(stripped)))
        if boundary:
            start = boundary.end()
    return spans


def split_sentences(text: str) -> list[str]:
    """Sentences and list items; good enough for extractive answers in English and Chinese."""
    return [text[start:end] for start, end in sentence_spans(text)]


# An answer quotes whole sentences; runs of short lines (table cells, PDF table rows) read as one unit.
SHORT_LINE_CHARS = 40
MAX_UNIT_CHARS = 260
_LIST_MARKER = re.compile(r"^\s*(?:[-*•▪]|\d{1,2}[.)])\s+")
_EMPHASIS = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")


@dataclass(frozen=True)
class TextUnit:
    """One quotable unit of a text: how it reads in an answer, and where it sits in the text."""

    text: str
    start: int
    end: int


def plain(sentence: str) -> str:
    """A sentence as it reads in an answer: no list marker, no Markdown emphasis."""
    sentence = _LIST_MARKER.sub("", sentence)
    return _EMPHASIS.sub(lambda m: m.group(1) or m.group(2), sentence).strip()


def _reading_length(text: str) -> int:
    """Length in Latin-letter equivalents: a Chinese character says about as much as a short word."""
    return len(text) + 2 * len(_CJK_CHAR.findall(text))


def answer_units(text: str) -> list[TextUnit]:
    """Sentences, with runs of short fragments (table cells, PDF table lines) kept together as one unit.

    Computed the same way at ingest (each unit's vector) and at answer time (the quoted units), so
    it must stay a pure function of the text; the pipeline version changes when it does.
    """
    units: list[TextUnit] = []
    run: list[TextUnit] = []

    def close_run() -> None:
        if run:
            units.append(TextUnit(" ".join(u.text for u in run), run[0].start, run[-1].end))
            run.clear()

    for start, end in sentence_spans(text):
        unit = TextUnit(plain(text[start:end]), start, end)
        if (
            _reading_length(unit.text) < SHORT_LINE_CHARS
            and sum(_reading_length(u.text) for u in [*run, unit]) < MAX_UNIT_CHARS
        ):
            run.append(unit)
            continue
        close_run()
        units.append(unit)
    close_run()
    return units


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters on one line, cut at a word where one is near the end, with "…"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut + "…"


# --- Chinese words, for judging evidence (not for the keyword index, which keeps its bigrams) ------------
# A bigram that straddles two words ("销政" in 报销政策) means nothing, so a question's coverage is
# measured on real words: rjieba (the jieba-rs binding; its dictionary ships inside the wheel, nothing is
# downloaded), with jieba's part-of-speech tags, which also mark place, person and organisation names.
_CJK_NAME_TAGS = frozenset(["ns", "nr", "nrt", "nrfg", "nt", "nz"])
# Particles, pronouns, numerals and quantity words ("几天", "多少"), prepositions, conjunctions, adverbs,
# punctuation: what a question says about its form, not its subject.
_CJK_FORM_TAGS = frozenset(["x", "uj", "ul", "uz", "ug", "ud", "uv", "y", "r", "m", "mq", "q", "p", "c", "d", "e", "o"])


@lru_cache(maxsize=1)
def _segmenter():
    import rjieba

    return rjieba


@lru_cache(maxsize=4096)
def cjk_words(text: str) -> tuple[tuple[str, str], ...]:
    """The Chinese words of `text` with their part-of-speech tags (jieba's tag set), in order."""
    words: list[tuple[str, str]] = []
    for run in re.findall(rf"[{_CJK}]+", text):
        words.extend((word, tag) for word, tag in _segmenter().tag(run))
    return tuple(words)


def cjk_content_words(text: str) -> list[str]:
    """The Chinese words that carry a question's subject (no particles, pronouns, question words). Words
    of one character ("去", "钱", "假") say little on their own: kept only when there is nothing else."""
    found: dict[str, None] = {}
    for word, tag in cjk_words(text):
        if tag not in _CJK_FORM_TAGS and word not in CJK_STOPWORDS:
            found.setdefault(word, None)
    longer = [w for w in found if len(w) > 1]
    return longer or list(found)


def cjk_names(text: str) -> list[str]:
    """Place, person and organisation names in Chinese text (东京, 里斯本): an answer must be about them."""
    return list(dict.fromkeys(w for w, tag in cjk_words(text) if tag in _CJK_NAME_TAGS and len(w) > 1))
