"""Language-aware text helpers shared by keyword search, chunking and answering."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
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
    tokens = raw_tokens(text)
    if not _HAS_CJK.search(text):  # most texts: no token to split, only the words to stem
        words = tokens if keep_stopwords else [t for t in tokens if t not in STOPWORDS]
        return _stemmer().stemWords(words) if words else []
    terms: list[str] = []
    words: list[str] = []
    for token in tokens:
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
    """The set of meaningful terms of a text, for coverage/overlap measures (a copy: callers may change it)."""
    return set(_content_terms(text))


def joined_terms(*texts: str) -> set[str]:
    """`content_terms` of the texts joined by line breaks ("{header}\n{text}"), from each text's own (cached)
    terms: no token spans whitespace, so the terms of joined texts are the union of theirs, and a chunk's text
    is tokenised once whatever heading or title it is read with."""
    terms: set[str] = set()
    for text in texts:
        terms |= _content_terms(text)
    return terms


# The same evidence chunks are measured again and again (each round, grade and answer step, question after
# question): tokenising and stemming them was a tenth of a question's time.
@lru_cache(maxsize=8192)
def _content_terms(text: str) -> frozenset[str]:
    return frozenset(t for t in text_terms(text) if len(t) > 1 or has_cjk(t))


@lru_cache(maxsize=4096)
def text_terms(text: str) -> tuple[str, ...]:
    """`keyword_terms` in order, for the texts read again and again (evidence chunks, their units): cached, so
    a unit's set of terms and its pairs of adjacent terms (bot.agent.answering) come from one tokenising. A
    term repeated in the text is one string, shared with the set `content_terms` keeps."""
    one: dict[str, str] = {}
    return tuple(one.setdefault(t, t) for t in keyword_terms(text))


# Identifiers: error codes, config keys, plan and form names, versions ("unroutable_address", "SEV1",
# "401k", "v4.12.0"). Written in a question, they must appear in the answer's source as written;
# punctuation inside may differ ("401(k)" is "401k").
_IDENTIFIER = re.compile(r"(?<![\w.-])[A-Za-z0-9](?:[\w.:/()-]*[A-Za-z0-9])?")
_IDENTIFIER_PART = re.compile(r"[A-Za-z]+|\d+")
_ORDINAL_OR_DECADE = re.compile(r"^\d+(?:st|nd|rd|th|s)$", re.I)  # "3rd", "1990s": words, not names


def identifiers(text: str) -> list[str]:
    """Tokens that name something exactly: letters mixed with digits, or words joined by underscores."""
    return list(_identifiers(text))


# Asked of the same question by the probe of each round, the grade's checks and the answer's (half a dozen times
# a question), and reading every token's characters was ~40 µs each time; a pure function of the text.
@lru_cache(maxsize=4096)
def _identifiers(text: str) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for token in _IDENTIFIER.findall(text):
        has_digit, has_letter = any(c.isdigit() for c in token), any(c.isalpha() for c in token)
        if has_letter and (has_digit or "_" in token) and not _ORDINAL_OR_DECADE.match(token):
            found.setdefault(token, None)
    return tuple(found)


@lru_cache(maxsize=1024)
def _identifier_pattern(identifier: str) -> re.Pattern[str]:
    parts = _IDENTIFIER_PART.findall(identifier)
    return re.compile(r"(?<![A-Za-z0-9_])" + r"[\W_]{0,2}".join(map(re.escape, parts)) + r"(?![A-Za-z0-9_])", re.I)


def mentions(text: str, identifier: str) -> bool:
    """Whether `text` names `identifier`, ignoring case and up to two punctuation marks between its parts."""
    return bool(_identifier_pattern(identifier).search(text))


# Where a sentence ends inside a block: after . ! ? (and closing quotes/brackets) and whitespace, or
# after a CJK full stop. Not after an abbreviation ("e.g.", "min.") or an initial.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'’”)\]]*\s+|(?<=[。！？；])\s*")
_ABBREVIATIONS = frozenset(
    ["e.g", "i.e", "etc", "vs", "cf", "approx", "min", "max", "no", "nr", "fig", "vol", "ca", "incl", "excl"]
    + ["dept", "mr", "mrs", "ms", "dr", "st", "jr", "sr", "resp", "esp"]
)
_LAST_WORD = re.compile(r"([\w.]+)[.!?][\"'’”)\]]*$")

# Line shapes. A table row: Markdown (| a | b |) or a parsed table ("a | b | c"); a rule line under a
# heading or a table header (---, ===, |---|---|); a Markdown heading; a code fence; a list item.
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$|^[^|\n]*\S\s\|\s[^\n]*$")
# A command synopsis ("git stash show [-u | --include-untracked] [<stash>]") has its bars inside brackets:
# alternatives of one option, not cells of a table.
_BRACKETED = re.compile(r"\[[^\[\]]*\]|\([^()]*\)|\{[^{}]*\}")


def is_table_row(line: str) -> bool:
    if not _TABLE_ROW.match(line):
        return False
    unbracketed = line
    while True:  # innermost brackets first: "[(-m | --message) <message>]"
        stripped = _BRACKETED.sub("", unbracketed)
        if stripped == unbracketed:
            break
        unbracketed = stripped
    return "|" in unbracketed


_RULE_LINE = re.compile(r"^\s*(?:([=\-~^+*_#.])\1{2,}|\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?)\s*$")
_HEADING_LINE = re.compile(r"^\s*#{1,6}\s")
_FENCE_LINE = re.compile(r"^\s*(?:```|~~~)")
_LIST_LINE = re.compile(r"^\s*(?:[-*•▪]|\d{1,2}[.)])\s+")
_TERM_LINE = re.compile(r"^\S.*?(?:::|;;)\s*$")  # a definition-list term (AsciiDoc "--quiet::")
# A hard-wrapped line (plain-text docs, man pages) ends mid-sentence and is long; a heading or a table
# line is short. The next line continues the sentence when it starts in lower case, or the line was long.
WRAPPED_LINE_CHARS = 45
_CONTINUES = re.compile(r"^[a-z(`'\"“‘\[{<$%&=,;]")
_ENDS_SENTENCE = re.compile(r"[.!?:;。！？；：]['\"’”)\]]*$")


@dataclass(frozen=True)
class _Block:
    """Lines that read as one: a paragraph (hard wraps joined), a list item, a table row, a heading, code."""

    kind: str  # "text" | "item" | "row" | "heading" | "term" | "code"
    start: int
    end: int


def _joins(previous: str, line: str) -> bool:
    """Whether `line` continues the sentence of `previous` (a hard line break, not a new unit)."""
    previous, line = previous.strip(), line.strip()
    if not previous or not line or previous.endswith(":"):
        return False
    if _CONTINUES.match(line):
        return True
    return len(previous) >= WRAPPED_LINE_CHARS and not _ENDS_SENTENCE.search(previous) and not has_cjk(previous)


def _blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    current: list = []  # [kind, start, end, last line]
    in_code = False

    def close() -> None:
        if current:
            blocks.append(_Block(current[0], current[1], current[2]))
            current.clear()

    offset = 0
    for raw in text.splitlines(keepends=True):
        line_start, offset = offset, offset + len(raw)
        line = raw.rstrip("\r\n")
        line_end = line_start + len(line)
        if _FENCE_LINE.match(line):
            close()
            in_code = not in_code
            continue
        if in_code:
            if line.strip():
                close()
                current[:] = ["code", line_start, line_end, line]
                close()
            continue
        if not any(ch.isalnum() for ch in line) or _RULE_LINE.match(line):
            close()  # a blank line, a rule, an AsciiDoc "+" continuation: a break between units
            continue
        kind = (
            "heading"
            if _HEADING_LINE.match(line)
            else "term"
            if _TERM_LINE.match(line)
            else "row"
            if is_table_row(line)
            else "item"
            if _LIST_LINE.match(line)
            else "text"
        )
        if kind == "text" and current and current[0] in ("text", "item") and _joins(current[3], line):
            current[2], current[3] = line_end, line
            continue
        close()
        current[:] = [kind, line_start, line_end, line]
        if kind in ("heading", "row", "term"):
            close()
    close()
    return blocks


def _sentence_spans_in(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans = []
    piece_start = start
    for boundary in [*_SENTENCE_END.finditer(text, start, end), None]:
        if boundary is not None:
            last = _LAST_WORD.search(text, piece_start, boundary.start())
            word = last.group(1).lower().rstrip(".") if last else ""
            if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue  # "e.g. `stash@{0}`", "J. Smith": the sentence goes on
        piece_end = boundary.start() if boundary else end
        piece = text[piece_start:piece_end]
        stripped = piece.strip()
        if stripped and any(ch.isalnum() for ch in stripped):
            left = piece_start + len(piece) - len(piece.lstrip())
            spans.append((left, left + len(stripped)))
        if boundary is not None:
            piece_start = boundary.end()
    return spans


def _spans_with_kinds(text: str) -> list[tuple[int, int, str]]:
    spans = []
    for block in _blocks(text):
        if block.kind in ("text", "item"):
            marker = _LIST_LINE.match(text[block.start : block.end]) if block.kind == "item" else None
            start = block.start + (marker.end() if marker else 0)  # "2. If not…": its number ends no sentence
            sentences = _sentence_spans_in(text, start, block.end)
            if marker and sentences:  # the first sentence's span keeps the item's marker
                sentences[0] = (block.start + len(marker.group(0)) - len(marker.group(0).lstrip()), sentences[0][1])
            spans.extend((s, e, block.kind) for s, e in sentences)
        elif any(ch.isalnum() for ch in text[block.start : block.end]):
            left = block.start + len(text[block.start : block.end]) - len(text[block.start : block.end].lstrip())
            spans.append((left, block.end, block.kind))
    return spans


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, list item, table row or heading in `text`, surrounding whitespace
    excluded. A sentence runs across hard line breaks; a table row is never cut at its punctuation."""
    return [(start, end) for start, end, _ in _spans_with_kinds(text)]


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
    """One quotable unit of a text: how it reads in an answer, and where it sits in the text.

    `lead` is what a list item needs to read as an answer: the sentence that introduces its list
    ("You can choose between two plans:"), empty when there is none. A table row reads with its
    header: its `text` pairs each cell with its column's name."""

    text: str
    start: int
    end: int
    lead: str = ""
    kind: str = "text"  # "text" | "item" | "row" | "heading" | "term" | "code"


def plain(sentence: str) -> str:
    """A sentence as it reads in an answer: one line, no list marker, no Markdown emphasis."""
    sentence = _LIST_MARKER.sub("", " ".join(sentence.split()))
    return _EMPHASIS.sub(lambda m: m.group(1) or m.group(2), sentence).strip()


def reading_length(text: str) -> int:
    """Length in Latin-letter equivalents: a Chinese character says about as much as a short word."""
    return len(text) + 2 * len(_CJK_CHAR.findall(text))


def _cells(row: str) -> list[str]:
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|"):
        row = row[:-1]
    return [plain(cell) for cell in row.split("|")]


_EMPTY_CELL = frozenset(["", "-", "–", "—", "n/a"])


def _row_with_header(row: str, header: str | None) -> str:
    """A table row as it reads alone: "Feature: Vehicles; Starter: Up to 25; Growth: Up to 250". A row shorter
    than its header is one whose last cells are empty (a parser drops them: "Ergonomic chair | $400" under
    "Item | Spending limit | Notes"): its cells still read with the first names."""
    cells = _cells(row)
    names = _cells(header) if header else []
    if not 0 < len(cells) <= len(names) or header == row:
        return " | ".join(c for c in cells if c)
    pairs = zip(names, cells, strict=False)
    return "; ".join(f"{name}: {cell}" if name else cell for name, cell in pairs if cell not in _EMPTY_CELL)


MAX_TERM_CHARS = 60


def _term_name(line: str) -> str:
    """A definition term as a lead: "--quiet", or for a long synopsis "push [-p|--patch] …::" just "push"."""
    term = plain(line).rstrip(":;").strip()
    if len(term) > MAX_TERM_CHARS:
        term = re.split(r"\s[\[<(]", term, maxsplit=1)[0][:MAX_TERM_CHARS]
    return term


def answer_units(text: str) -> list[TextUnit]:
    """Sentences (across hard line breaks), list items with their lead-in, table rows with their header,
    and runs of short fragments (PDF table lines) kept together as one unit.

    Computed the same way at ingest (each unit's vector, pooled over its span) and at answer time (the
    quoted units), so it must stay a pure function of the text; the pipeline version changes when it does.
    """
    return list(_answer_units(text))  # a new list (callers may change it); the units themselves are frozen


# The same evidence chunks are split again and again: in every probe's re-ranking of each chunk, in grading,
# in the answer step, question after question; splitting them was a fifth of a question's Python.
@lru_cache(maxsize=8192)
def _answer_units(text: str) -> tuple[TextUnit, ...]:
    units: list[TextUnit] = []
    run: list[TextUnit] = []

    def close_run() -> None:
        if run:
            units.append(TextUnit(" ".join(u.text for u in run), run[0].start, run[-1].end, run[0].lead, run[0].kind))
            run.clear()

    header: str | None = None  # the current table's first row
    lead = ""  # the sentence introducing the current list, or the term a definition defines
    terms: list[str] = []
    previous_kind = ""
    spans = _spans_with_kinds(text)
    for i, (start, end, kind) in enumerate(spans):
        raw = text[start:end]
        if kind == "term":
            term = _term_name(raw)
            terms = [*terms, term] if previous_kind == "term" else [term]
            close_run()
            units.append(TextUnit(plain(raw), start, end, kind=kind))
            previous_kind = kind
            continue
        if previous_kind == "term":
            lead = ", ".join(terms) + ":"
            unit = TextUnit(plain(raw), start, end, lead, kind)
            close_run()
            units.append(unit)
            previous_kind = kind
            continue
        if kind == "row":
            header = header if previous_kind == "row" else raw
            unit = TextUnit(_row_with_header(raw, header), start, end, kind=kind)
            close_run()
            units.append(unit)
            previous_kind = kind
            continue
        if kind == "item":
            lead = lead if previous_kind == "item" else (units[-1].text if previous_kind == "lead" else "")
        else:
            lead = ""
        unit = TextUnit(plain(raw), start, end, lead if kind == "item" else "", kind)
        if len(run) == 1 and _defines(text, run[0], unit):
            close_run()
            unit = replace(unit, lead=f"{units[-1].text}:")
        previous_kind = "lead" if kind == "text" and unit.text.endswith((":", "：")) else kind
        if (
            reading_length(unit.text) < SHORT_LINE_CHARS
            and sum(reading_length(u.text) for u in [*run, unit]) < MAX_UNIT_CHARS
            and kind != "heading"
            and previous_kind != "lead"
        ):
            if not _heads_next_paragraph(text, spans, i):
                if run and not _same_shape(run[-1].text, unit.text):
                    close_run()
                run.append(unit)
                continue
            unit = replace(unit, kind="heading")
            previous_kind = "heading"
        close_run()
        units.append(unit)
    close_run()
    return tuple(units)


MAX_DEFINED_TERM_CHARS = 40


def _defines(text: str, term: TextUnit, unit: TextUnit) -> bool:
    """Whether a short line on its own is the term that the sentence on the next line defines (an HTML <dt>
    and its <dd>: "Per diem" / "$75 per day for domestic trips."): the sentence reads with it as its lead. Not
    a heading the sentence names itself ("Hotels" / "Hotels are capped per night.")."""
    return (
        term.kind == "text"
        and reading_length(term.text) <= MAX_DEFINED_TERM_CHARS
        and not has_cjk(term.text + unit.text)
        and not _SENTENCE_ENDING.search(term.text)
        and not _ENDS_WITH_FIGURE.search(term.text)
        and unit.text.rstrip("'\"’”)]").endswith(".")
        and "\n" in text[term.end : unit.start]
        and not content_terms(term.text) <= content_terms(unit.text)
    )


# Runs of short lines are either short sentences of a paragraph ("Yes. You can plan up to 14 days in advance.") or
# cells of a table (PDF tables come out a cell per line), never both: "TripDesk shows the cap when you search." is
# not the first cell of the table under it. Nor is the heading of the paragraph under a table ("Meals and per diem"
# before "When you travel overnight you receive…") its last cell. (Chinese text keeps its runs: 。 ends its cells too.)
_SENTENCE_ENDING = re.compile(r"[.!?]['\"’”)\]]*$")
_ENDS_WITH_FIGURE = re.compile(r"\d[\d,.]*\s*[%MKkmb]?$")


def _same_shape(previous: str, text: str) -> bool:
    if has_cjk(previous) or has_cjk(text):
        return True
    return bool(_SENTENCE_ENDING.search(previous)) == bool(_SENTENCE_ENDING.search(text))


def _heads_next_paragraph(text: str, spans: list[tuple[int, int, str]], i: int) -> bool:
    start, end, kind = spans[i]
    line = text[start:end]
    if kind != "text" or i + 1 == len(spans) or has_cjk(line) or _ENDS_SENTENCE.search(line):
        return False
    if _ENDS_WITH_FIGURE.search(line):
        return False  # "Enterprise 3,000": a table's last row
    next_start, next_end, next_kind = spans[i + 1]
    return (
        next_kind in ("text", "item")
        and "\n" in text[end:next_start]
        and reading_length(text[next_start:next_end]) >= SHORT_LINE_CHARS
        and bool(_ENDS_SENTENCE.search(text[next_start:next_end]))
    )


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
# Words jieba tags as content that say how a question is asked ("怎么办", "什么时候", "一般", "应该") or
# whom it is about in general ("同事" when the documents say 员工 or 人员): not what a passage must contain.
_CJK_FORM_WORDS = frozenset(
    ["怎么办", "时候", "一般", "应该", "同事", "这边", "那边", "大家", "请问", "一共"]
    # yes-no question forms ("有没有下午茶", "需不需要发票"): how it is asked, not a thing a document names
    + ["有没有", "能不能", "可不可以", "是不是", "要不要", "会不会", "需不需要", "用不用", "不能", "不会"]
)
# A word built on a question morpheme asks for its answer ("几楼" is answered by "18楼", "多长时间" by "1 小时"):
# jieba's dictionary tags some of them nouns.
_CJK_ASKING = re.compile(r"几|多少|多长|多久|多大|什么|哪|谁|怎么|为何")


def _is_form_word(word: str) -> bool:
    return word in CJK_STOPWORDS or word in _CJK_FORM_WORDS or bool(_CJK_ASKING.search(word))


@lru_cache(maxsize=1)
def _segmenter():
    import rjieba

    return rjieba


# jieba's HMM guesses words its dictionary lacks, and on a short question it glues a noun to the particle,
# modal or measure word beside it ("哪张卡" → 张卡, a person's name; "能报吗" → 能报; "报销款会" → 款会):
# nouns no document uses, which would refuse the question. Without it an unknown word stays in characters,
# and `cjk_words(text, known)` joins those back where the documents write them as one word (年 假 → 年假).
_HMM = False
# Localisers ("卡里", in the card; "系统上"): the dictionary holds some such pairs as names, but after a
# one-character noun they say where, not who.
_CJK_LOCALISERS = frozenset("里上下中内外")
_CJK_PARTICLE_TAGS = frozenset(["x", "uj", "ul", "uz", "ug", "ud", "uv", "y", "e", "o"])


@lru_cache(maxsize=4096)
def _tagged(text: str) -> tuple[tuple[str, str], ...]:
    words: list[tuple[str, str]] = []
    for run in re.findall(rf"[{_CJK}]+", text):
        words.extend((word, tag) for word, tag in _segmenter().tag(run, _HMM))
    return tuple(words)


def cjk_words(text: str, known: Callable[[str], bool] | None = None) -> tuple[tuple[str, str], ...]:
    """The Chinese words of `text` with their part-of-speech tags (jieba's tag set), in order. With `known`
    (does the knowledge base write this?), words are read as the documents write them: two one-character
    words joined where the documents have them as one ("年" "假" → "年假", "到" "账" → "到账"), and a
    name made of a one-character noun and a localiser ("卡里") read as that noun when the KB never writes it."""
    words = _tagged(text)
    if known is None:
        return words
    read: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        word, tag = words[i]
        if i + 1 < len(words) and _joinable(words[i]) and _joinable(words[i + 1]) and known(word + words[i + 1][0]):
            after = words[i + 1][1]
            # "最" "多" → 最多 says how much, as its parts did; "年" "假" → 年假 is a thing
            joined = "d" if {tag, after} <= _CJK_FORM_TAGS else "n" if "n" in after[:1] + tag[:1] else "v"
            read.append((word + words[i + 1][0], joined))
            i += 2
            continue
        if tag in _CJK_NAME_TAGS and len(word) == 2 and word[1] in _CJK_LOCALISERS and not known(word):
            read.extend([(word[0], "n"), (word[1], "f")])
        else:
            read.append((word, tag))
        i += 1
    return tuple(read)


def _joinable(word: tuple[str, str]) -> bool:
    return len(word[0]) == 1 and word[1] not in _CJK_PARTICLE_TAGS and word[0] not in CJK_STOPWORDS


def cjk_content_words(text: str, known: Callable[[str], bool] | None = None) -> list[str]:
    """The Chinese words that carry a question's subject (no particles, pronouns, question words). Words
    of one character ("去", "钱", "假") say little on their own: kept only when there is nothing else."""
    found: dict[str, None] = {}
    for word, tag in cjk_words(text, known):
        if tag not in _CJK_FORM_TAGS and not _is_form_word(word):
            found.setdefault(word, None)
    longer = [w for w in found if len(w) > 1]
    return longer or list(found)


def cjk_names(text: str, known: Callable[[str], bool] | None = None) -> list[str]:
    """Place, person and organisation names in Chinese text (东京, 里斯本): an answer must be about them."""
    return list(dict.fromkeys(w for w, tag in cjk_words(text, known) if tag in _CJK_NAME_TAGS and len(w) > 1))


# A word that qualifies the noun after it names what the question is about as much as the noun does:
# "健身补贴" (a gym allowance) is not the lunch allowance of the documents.
_CJK_MODIFIER_TAGS = frozenset(["v", "vn", "a", "an"])


def cjk_nouns(text: str, known: Callable[[str], bool] | None = None) -> list[str]:
    """The Chinese nouns of `text` (jieba's n* tags, two characters or more) that carry its subject, and
    the words that qualify one ("健身" of 健身补贴): a KB that never mentions 宠物 or 年终奖 cannot answer a
    question about them."""
    words = cjk_words(text, known)
    found: dict[str, None] = {}
    for i, (word, tag) in enumerate(words):
        if len(word) < 2 or _is_form_word(word):
            continue
        # (where a noun phrase starts — after 的, a noun, or at the start — not a verb's object: "请假回来材料")
        opens = i == 0 or words[i - 1][0] == "的" or words[i - 1][1].startswith("n")
        qualifies = tag in _CJK_MODIFIER_TAGS and opens and i + 1 < len(words) and words[i + 1][1].startswith("n")
        if tag.startswith("n") or qualifies:
            found.setdefault(word, None)
    return list(found)


# --- money amounts and the ranges a rule states ("Up to $2,000", "$2,000.01 to $7,500", "Above $1,000,000") ---

_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9}
_FIGURE = r"\d[\d,]*(?:\.\d+)?"
_SCALE_WORD = r"(?:k|mn?|bn?|thousand|million|billion)\b"
# An amount is money when it has a currency sign or a scale ("$5,000", "9k", "¥600", "a million").
_MONEY = re.compile(
    rf"(?:[$€£¥]|\b(?:usd|eur|gbp|cny|rmb)\s?)({_FIGURE})\s?({_SCALE_WORD})?|\b({_FIGURE})\s?({_SCALE_WORD})"
    r"|\ba (thousand|million|billion)\b",
    re.I,
)
_ABOVE = re.compile(r"(?:\b(?:above|over|more than|greater than|exceeds?|exceeding|beyond)|超过|高于)\s*$", re.I)
_BELOW = re.compile(r"(?:\b(?:up to|below|under|less than|at most|no more than|within)|不超过|低于|最多)\s*$", re.I)
_RANGE_JOIN = re.compile(r"^\s*(?:to|-|–|—|and)\s*$", re.I)


def _money(text: str) -> list[tuple[int, int, float]]:
    """Each money amount in `text`: (start, end, value)."""
    found = []
    for m in _MONEY.finditer(text):
        if m.group(5):
            value = _SCALE.get(m.group(5).casefold(), 1.0)
        else:
            figure, scale = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            value = float(figure.replace(",", "")) * _SCALE.get((scale or "").lower(), 1.0)
        found.append((m.start(), m.end(), value))
    # An amount in words is money by its scale too, as "3 thousand" is: "three thousand dollars", "two million".
    for m in _NUMBER_WORD.finditer(text) if _may_write_number_words(text) else ():
        value = _worded_value(m)
        scaled = (m.group(3) or "").lower() in _SCALE and m.group(1).lower() != "a"  # ("a million" is read above)
        if value is not None and scaled and not any(s < m.end() and m.start() < e for s, e, _ in found):
            found.append((m.start(), m.end(), float(value)))
    return sorted(found)


def asked_amount(question: str) -> float | None:
    """The one money amount a question names, as the rules would compare it: "over a million" is just above it,
    "under $500" just below; None when it names none or several."""
    amounts = _money(question)
    if len(amounts) != 1:
        return None
    start, _, value = amounts[0]
    before = question[:start]
    if _BELOW.search(before):
        return value - 0.005
    if _ABOVE.search(before):
        return value + 0.005
    return value


def money_ranges(text: str) -> list[tuple[float, float]]:
    """The ranges of money a text states: "$A to $B" → (A, B); "up to / under $A" → (0, A); "above / over $A" →
    (just above A, ∞). A bare amount states no range."""
    amounts = _money(text)
    ranges: list[tuple[float, float]] = []
    i = 0
    while i < len(amounts):
        start, end, value = amounts[i]
        following = amounts[i + 1] if i + 1 < len(amounts) else None
        if following and _RANGE_JOIN.match(text[end : following[0]]) and following[2] >= value:
            ranges.append((value, following[2]))
            i += 2
            continue
        before = text[max(0, start - 20) : start]
        if _BELOW.search(before):
            ranges.append((0.0, value))
        elif _ABOVE.search(before):
            ranges.append((value + 0.001, math.inf))  # "above $5,000" leaves $5,000 itself out
        i += 1
    return ranges


# --- numbers by value: "two" is "2", "5000" is "¥5,000", "10k" is "$10,000", "a million" is "1,000,000" ---

# A numeral standing alone, or after a currency sign or a Chinese character ("超过5000"): not one inside a code
# ("v2", "SEV1", "4.12.0") or a word ("3rd", "2xx", "1990s"), nor a page's number ("p. 3" of a PDF's location).
_NUMERAL = re.compile(
    r"(?<![A-Za-z0-9_.,])(?<!\bp\.\s)(?<!\bpp\.\s)(?<!\bpage\s)"
    r"(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:\s?(thousand|million|billion)\b|(k|mn?|bn?)\b)?"
    r"(?![.,]?\d)(?![A-Za-z])",
    re.I,
)
_UNITS_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"]
_UNITS_WORDS += ["twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS_WORDS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD_VALUES = {w: n for n, w in enumerate(_UNITS_WORDS)} | {w: 20 + 10 * n for n, w in enumerate(_TENS_WORDS)}
_WORD_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
# "one" alone is mostly a pronoun ("which one", "one of the plans"): a number only with a scale ("one million").
_NUMBER_WORD = re.compile(
    rf"\b(?:(a|{'|'.join(_WORD_VALUES)})(?:[\s-]({'|'.join(_UNITS_WORDS[1:10])}))?(?:\s({'|'.join(_WORD_SCALES)}))?)\b",
    re.I,
)
VALUE_MARK = "#"  # a value term is "#" and the number: no word of any text can be one

# Cheap tests that a text holds no number of a kind, run before `_NUMERAL` and `_NUMBER_WORD`, whose matching was most
# of the work of reading a chunk's numbers the first time (each unit and chunk text is read once per process): a
# numeral needs a digit (`\d`, as in `_NUMERAL`); a worded number other than a bare "a" or "one" (which `_worded_value`
# refuses) needs one of `_NUMBER_WORD`'s other words as a whole word. That test is exact only on ASCII text, where
# case-blind matching is ASCII's (no "ſix"): any other text takes the pattern.
_DIGIT = re.compile(r"\d")
_LETTER_RUN = re.compile(r"[a-z]+")
_NUMBER_WORD_WORDS = frozenset(_WORD_VALUES).union(_WORD_SCALES) - {"a", "one"}


def _may_write_number_words(text: str) -> bool:
    return not text.isascii() or not _NUMBER_WORD_WORDS.isdisjoint(_LETTER_RUN.findall(text.lower()))


def value_term(value: float) -> str:
    """The term a number of this value is read as, however it is written."""
    return VALUE_MARK + (str(int(value)) if value == int(value) else repr(value))


def term_value(term: str) -> float | None:
    """The number a plain value term stands for ("#5000" → 5000.0); None for any other term, a duration's
    ("#14d") included."""
    if not term.startswith(VALUE_MARK):
        return None
    try:
        return float(term.removeprefix(VALUE_MARK))
    except ValueError:
        return None


# A Chinese numeral ("两", "十五", "五千", "一万", "百分之五十"): read only where it is a number, not a piece of a word.
# Written with a place (十百千万) it is one ("十五天", "超过五千"); a lone digit only before a measure word ("三天",
# "两次"); never after a character it makes a word with ("统一", "唯一", "万一", "之一", "第三", a weekday "周三",
# "星期三" — but "每周两天", "假期三天" count), nor before
# one ("一些", "一般", "一律", "一等座", "三月" the month, "一、" a section's number, "十分" very, "三分之一" a third).
# A bare 一 ("一天", "一次") is "a day", "once", as the English "a" and "one" are no number alone; 一 with a place
# is ("一万", "一百").
_CJK_DIGITS = dict(zip("零〇一二两三四五六七八九", (0, 0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9), strict=True))
_CJK_PLACES = {"十": 10, "百": 100, "千": 1_000}
_CJK_MYRIADS = {"万": 10_000, "亿": 100_000_000}
_CJK_MEASURES = "天日周年个次位名人张晚元块倍岁小分秒件份项条本台家道"
_CJK_NUMERAL = re.compile(
    r"(?<![统唯万之第同单初])(?<!星期)(?<!礼拜)(?<!周(?=[一二三四五六](?![十百千万亿天次个小])))(百分之)?"
    r"([零〇一二两三四五六七八九十百千万亿]+)"
    r"(?![些般律起切直定旦致共样边方面等月、])(?!分(?!钟))"
)


def _cjk_numeral_value(numeral: str) -> int | None:
    """The value of a Chinese numeral ("十五" 15, "五千" 5000, "一百零五" 105; "一百五" is 150 and "两万五" 25,000, as
    said aloud); None when it is no one number ("三五天" is three to five days, "一二" a list)."""
    total, section, digit, place, zero = 0, 0, None, 1, False
    for ch in numeral:
        if ch in "零〇":
            zero = True
        elif ch in _CJK_DIGITS:
            if digit is not None:
                return None
            digit = _CJK_DIGITS[ch]
        elif ch in _CJK_PLACES:
            if digit is None and (section or total or ch != "十"):  # only 十 stands alone for 一十 ("十五")
                return None
            place = _CJK_PLACES[ch]
            section += (1 if digit is None else digit) * place
            digit, zero = None, False
        else:  # 万, 亿
            if digit is None and not section:
                return None
            place = _CJK_MYRIADS[ch]
            total += (section + (digit or 0)) * place
            section, digit, zero = 0, None, False
    if digit is not None and place >= 100 and not zero:  # "一百五": the digit after a place counts the next one down
        digit *= place // 10
    return total + section + (digit or 0)


def _cjk_numbers(text: str) -> list[tuple[int, int, int]]:
    """Each Chinese numeral of `text` that is a number there: (start, end, value)."""
    found = []
    for m in _CJK_NUMERAL.finditer(text):
        numeral = m.group(2)
        value = _cjk_numeral_value(numeral)
        if value is None:
            continue
        placed = m.group(1) or any(ch in _CJK_PLACES or ch in _CJK_MYRIADS for ch in numeral)
        following = text[m.end() : m.end() + 1]
        if not placed and (numeral == "一" or not following or following not in _CJK_MEASURES):
            continue
        found.append((m.start(), m.end(), value))
    return found


# A duration in a unit that converts exactly to a smaller one a reader would accept as the same: weeks are 7 days,
# years 12 months, hours 60 minutes ("two weeks" is "14 days", "48 hours" is "2,880 minutes"). Nothing else
# converts: a month is no fixed number of days, a working day no fixed number of hours ("half a day" is not "4
# hours"), and a "business day" or "working day" is no calendar day. "3 周岁" is an age, "6 月" a month's name, and
# a 年 after digits as often a date's year ("2026 年") as a count of years.
_DURATION = re.compile(
    r"[\s-]?(weeks?|wks?|days?|years?|yrs?|months?|mos?|hours?|hrs?|minutes?|mins?)\b|\s?(周(?!岁)|个?星期|天|小时|分钟|个月)",
    re.I,
)
_DURATION_UNITS = {  # unit -> (its size in the smaller unit, the smaller unit's mark)
    **dict.fromkeys(("week", "wk", "周", "星期", "个星期"), (7, "d")),
    **dict.fromkeys(("day", "天"), (1, "d")),
    **dict.fromkeys(("year", "yr"), (12, "mo")),
    **dict.fromkeys(("month", "mo", "个月"), (1, "mo")),
    **dict.fromkeys(("hour", "hr", "小时"), (60, "min")),
    **dict.fromkeys(("minute", "min", "分钟"), (1, "min")),
}


def _duration(text: str, end: int, value: float) -> tuple[str, bool] | None:
    """The duration a number ending at `end` counts, if a time unit follows it: (the value term in the smaller
    unit, whether it was written in the larger one)."""
    m = _DURATION.match(text, end)
    if not m:
        return None
    unit = (m.group(1) or m.group(2)).lower()
    factor, smaller = _DURATION_UNITS.get(unit) or _DURATION_UNITS[unit.removesuffix("s")]
    return value_term(value * factor) + smaller, factor != 1


def _with_duration(found: list[tuple[int, int, str]], text: str, start: int, end: int, value: float) -> None:
    """Add a number's spans: its value; and, before a time unit, the duration in the smaller unit, which is all a
    number in the larger unit is read as ("2 weeks" is "#14d", not "#2"; "14 days" is "#14" and "#14d"). The unit's
    word stays a term of its own: "how many weeks' notice" is about "4 weeks' notice"."""
    duration = _duration(text, end, value)
    if duration is None:
        found.append((start, end, value_term(value)))
        return
    term, converted = duration
    if not converted:
        found.append((start, end, value_term(value)))
    found.append((start, end, term))


# Coverage, the value terms and the asked amounts all read the numbers of the same chunk texts and questions,
# question after question; a pure function of the text, so a republished chunk is read anew.
@lru_cache(maxsize=8192)
def number_spans(text: str) -> tuple[tuple[int, int, str], ...]:
    """Each number `text` writes, in digits, in words or in Chinese numerals: (start, end, its value term); a
    duration also by its value in the smaller unit (`_DURATION`)."""
    found: list[tuple[int, int, str]] = []
    for start, end, value in _cjk_numbers(text) if has_cjk(text) else ():
        _with_duration(found, text, start, end, value)
    for m in _NUMERAL.finditer(text) if _DIGIT.search(text) else ():
        value = float(m.group(1).replace(",", "") + (m.group(2) or ""))
        scale = (m.group(3) or m.group(4) or "").lower()
        if scale:
            found.append((m.start(), m.end(), value_term(value * _SCALE[scale])))
        else:
            _with_duration(found, text, m.start(), m.end(), value)
    for m in _NUMBER_WORD.finditer(text) if _may_write_number_words(text) else ():
        value = _worded_value(m)
        if value is not None:
            _with_duration(found, text, m.start(), m.end(), value)
    return tuple(sorted(found))


def _worded_value(m: re.Match[str]) -> int | None:
    """The value of a `_NUMBER_WORD` match; None for a word that is no number there ("which one", "two five")."""
    # casefold, not lower: the pattern matches case-insensitively, so "ſix" (a long s) matched as "six"
    first, second, scale = (g.casefold() if g else "" for g in m.groups())
    if first in ("a", "one") and not scale:
        return None
    value = 1 if first == "a" else _WORD_VALUES.get(first)
    if value is None:
        return None
    if second:
        if first not in _TENS_WORDS or second not in _WORD_VALUES:  # "twenty-five", not "two five"
            return None
        value += _WORD_VALUES[second]
    return value * _WORD_SCALES.get(scale, 1)


@lru_cache(maxsize=8192)  # read for every evidence chunk of every question, as `_content_terms` is
def number_terms(text: str) -> frozenset[str]:
    """The value terms of the numbers `text` writes: a question's "two" is covered by a document's "2"."""
    return frozenset(term for _, _, term in number_spans(text))


def stated_terms(*texts: str) -> set[str]:
    """What coverage reads the texts as stating: their content terms (`joined_terms`) and their numbers' values."""
    terms = joined_terms(*texts)
    for text in texts:
        terms |= number_terms(text)
    return terms


@lru_cache(maxsize=8192)
def valued_terms(text: str) -> frozenset[str]:
    """`content_terms`, with each number read as its value term instead of its pieces ("5,000" is "#5000", not
    "5" and "000"; "two" is "#2"), for what coverage and answer choice compare. Codes keep their digits as
    written ("SEV1", "v2", "4.12.0"): identifiers must match as written."""
    spans = number_spans(text)
    if not spans:
        return _content_terms(text)
    parts, last = [], 0
    for start, end, _ in spans:
        parts.append(text[last:start])
        last = max(last, end)
    parts.append(text[last:])
    return frozenset(_content_terms(" ".join(parts)) | {term for _, _, term in spans})
