"""Structure-aware chunking sized for the embedding model.

Sections (a heading path or a page) are never merged across boundaries, so every chunk has one
honest location. Inside a section, llama-index's SentenceSplitter packs sentences up to the size
budget, counted in the embedding model's own word pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tools.parsing import ParsedDocument

# MiniLM reads at most 256 word pieces; the chunk header (title + location) takes some of them.
CHUNK_TOKENS = 180
CHUNK_OVERLAP_TOKENS = 24
# Tiny trailing pieces carry little evidence on their own; merge them into the previous chunk.
MIN_CHUNK_CHARS = 80


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
        pieces = [p.strip() for p in splitter.split_text(section.text) if p.strip()]
        if len(pieces) > 1 and len(pieces[-1]) < MIN_CHUNK_CHARS:
            tail = pieces.pop()
            pieces[-1] = f"{pieces[-1]} {tail}"
        for piece in pieces:
            drafts.append(ChunkDraft(len(drafts), piece, section.location))
    return drafts


def chunk_header(title: str, location: str) -> str:
    """Context the chunk text alone lacks; prepended for embedding and keyword indexing."""
    if not location or location == title:
        return title
    return f"{title} — {location}"
