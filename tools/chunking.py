"""Structure-aware chunking sized for the embedding model.

Sections (a heading path or a page) are never merged across boundaries, so every chunk has one
honest location. Inside a section, llama-index's SentenceSplitter packs sentences up to the size
budget, counted in the embedding model's own word pieces.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tools.parsing import ParsedDocument

# MiniLM reads at most 256 word pieces; the chunk header (title + location) takes some of them.
CHUNK_TOKENS = 180
CHUNK_OVERLAP_TOKENS = 24
# Tiny trailing pieces carry little evidence on their own; merge them into the previous chunk.
MIN_CHUNK_CHARS = 80
# Text with no boundary for this long is cut into windows here, not by the sentence splitter, which
# tokenizes what it cannot split one character (or one word) at a time: a 1 MB line of CJK text with no
# full stop took 50 s, of words with no punctuation 13 s, and a 1 MB "word" became a single chunk.
MAX_RUN_CHARS = 1000  # no whitespace and no punctuation (a base64 blob, CJK without a full stop)
MAX_UNPUNCTUATED_CHARS = 3000  # no sentence end and no line break (a keyword dump, one huge line)
_LONG_RUN = re.compile(
    r"[^\s.!?;:,。！？；：，、]{"
    + str(MAX_RUN_CHARS)
    + r",}|[^\n.!?;:。！？；：]{"
    + str(MAX_UNPUNCTUATED_CHARS)
    + ",}"
)


@dataclass(frozen=True)
class ChunkDraft:
    index: int
    text: str
    location: str


def chunk_document(
    parsed: ParsedDocument,
    tokenizer: Callable[[str], list],
    chunk_tokens: int = CHUNK_TOKENS,
    overlap_tokens: int = CHUNK_OVERLAP_TOKENS,
) -> list[ChunkDraft]:
    from llama_index.core.node_parser import SentenceSplitter  # seconds to import: only when chunking

    splitter = SentenceSplitter(
        chunk_size=chunk_tokens,
        chunk_overlap=overlap_tokens,
        tokenizer=tokenizer,
        paragraph_separator="\n\n",
    )
    drafts: list[ChunkDraft] = []
    for section in parsed.sections:
        pieces: list[str] = []
        for is_run, segment in _segments(section.text):
            split = _windows(segment, tokenizer, chunk_tokens) if is_run else splitter.split_text(segment)
            pieces += [p.strip() for p in split if p.strip()]
        if len(pieces) > 1 and len(pieces[-1]) < MIN_CHUNK_CHARS:
            tail = pieces.pop()
            pieces[-1] = f"{pieces[-1]} {tail}"
        for piece in pieces:
            drafts.append(ChunkDraft(len(drafts), piece, section.location))
    return drafts


def _segments(text: str) -> Iterator[tuple[bool, str]]:
    """The text in order, as (is a long run, segment) pairs."""
    position = 0
    for match in _LONG_RUN.finditer(text):
        if match.start() > position:
            yield False, text[position : match.start()]
        yield True, match.group(0)
        position = match.end()
    if position < len(text):
        yield False, text[position:]


def _windows(run: str, tokenizer: Callable[[str], list], chunk_tokens: int) -> list[str]:
    """Consecutive slices of a long run, each within the token budget, cut at a space where there is
    one (a few tokenizer calls per slice, whatever the text)."""
    width = chunk_tokens * 4
    windows: list[str] = []
    start = 0
    while start < len(run):
        window = _cut(run, start, width)
        while width > 8 and len(tokenizer(window)) > chunk_tokens:
            width //= 2
            window = _cut(run, start, width)
        windows.append(window)
        start += len(window)
    return windows


def _cut(run: str, start: int, width: int) -> str:
    window = run[start : start + width]
    if start + width < len(run):
        space = window.rfind(" ")
        if space > width // 2:
            window = window[: space + 1]
    return window


def chunk_header(title: str, location: str) -> str:
    """Context the chunk text alone lacks; prepended for embedding and keyword indexing."""
    if not location or location == title:
        return title
    return f"{title} — {location}"
