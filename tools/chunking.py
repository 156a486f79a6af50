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
# [CLS] and [SEP]: the model reads them inside its window too.
SPECIAL_TOKENS = 2
# A header so long that less than this is left of the window still gets chunks this big (the model then
# truncates them): a chunk of a few words would be all title.
MIN_CHUNK_TOKENS = 64
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
class ChunkWindow:
    """How much text one chunk holds, in the embedding model's word pieces.

    `window_tokens` is what the model reads of one text (None: no limit worth fitting, e.g. an API model);
    when set, each chunk is cut so that its header, its text and the special tokens fit in it. Every field
    changes what a document becomes, so all of them are in `identity` (ingest hashes it with the content)."""

    chunk_tokens: int = CHUNK_TOKENS
    overlap_tokens: int = CHUNK_OVERLAP_TOKENS
    window_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.chunk_tokens < MIN_CHUNK_TOKENS:
            raise ValueError(f"a chunk must hold at least {MIN_CHUNK_TOKENS} word pieces (got {self.chunk_tokens})")
        if not 0 <= self.overlap_tokens <= self.chunk_tokens // 2:
            raise ValueError(
                f"the overlap must be between 0 and half a chunk ({self.chunk_tokens // 2}), got {self.overlap_tokens}"
            )
        if self.window_tokens is not None and self.window_tokens < MIN_CHUNK_TOKENS + SPECIAL_TOKENS:
            raise ValueError(f"a model window of {self.window_tokens} word pieces is too small to chunk for")

    @property
    def identity(self) -> str:
        return f"chunks {self.chunk_tokens}/{self.overlap_tokens}/{self.window_tokens or '-'}"

    def fits(self, tokens: int) -> bool:
        """Whether a text of `tokens` word pieces (header included) is read whole by the model."""
        return self.window_tokens is None or tokens + SPECIAL_TOKENS <= self.window_tokens

    def budget(self, header_tokens: int) -> int:
        """Word pieces of text for one chunk under a header of `header_tokens`."""
        if self.window_tokens is None:
            return self.chunk_tokens
        room = self.window_tokens - SPECIAL_TOKENS - header_tokens
        return max(MIN_CHUNK_TOKENS, min(self.chunk_tokens, room))


@dataclass(frozen=True)
class ChunkDraft:
    index: int
    text: str
    location: str


def chunk_document(
    parsed: ParsedDocument, tokenizer: Callable[[str], list], window: ChunkWindow = ChunkWindow()
) -> list[ChunkDraft]:
    from llama_index.core.node_parser import SentenceSplitter  # seconds to import: only when chunking

    splitters: dict[int, SentenceSplitter] = {}
    drafts: list[ChunkDraft] = []
    for section in parsed.sections:
        header_tokens = len(tokenizer(chunk_header(parsed.title, section.location))) if window.window_tokens else 0
        budget = window.budget(header_tokens)
        if budget not in splitters:
            splitters[budget] = SentenceSplitter(
                chunk_size=budget,
                chunk_overlap=min(window.overlap_tokens, budget // 2),
                tokenizer=tokenizer,
                paragraph_separator="\n\n",
            )
        pieces: list[str] = []
        for is_run, segment in _segments(section.text):
            split = _windows(segment, tokenizer, budget) if is_run else splitters[budget].split_text(segment)
            pieces += [p.strip() for p in split if p.strip()]
        if len(pieces) > 1 and len(pieces[-1]) < MIN_CHUNK_CHARS:
            merged = f"{pieces[-2]} {pieces[-1]}"
            # Not past the model's window: a tail it never reads would be found by keywords alone.
            if window.window_tokens is None or window.fits(header_tokens + len(tokenizer(merged))):
                pieces[-2:] = [merged]
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
