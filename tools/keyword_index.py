"""Keyword (BM25) index of a KB's live chunks.

Local Chroma has no sparse index, so this one is derived from the stored chunks with bm25s and our
own tokenizer (stemmed English, CJK character bigrams). It is persisted per KB generation, so every
process (Slack bot, CLI) sees the same index and rebuilds only after the KB changed; an index saved
by another tokenizer/format version is rebuilt, never trusted.

Two levels: every chunk is scored on its own text (header + text) *and* on its whole document (its
title once + all its chunks), and the two add up (DOCUMENT_WEIGHT). A chunk of a document that is
about the query as a whole outranks an equally matching chunk of a document that mentions the terms
in passing; within one document the chunk's own score still decides. Tuned on SciFact train
(docs/benchmarks.md): chunk-only BM25 nDCG@10 0.691 → 0.700 with the document level.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import bm25s
import numpy as np

from tools.text import TOKENIZER_VERSION, keyword_terms

logging.getLogger("bm25s").setLevel(logging.WARNING)

# k1/b: the Anserini defaults (robust across BEIR), better than 1.2/0.75 in the fused ranking on SciFact train
# (docs/benchmarks.md): chunks are short and similar in length, so less length normalisation.
K1, B = 0.9, 0.4
FORMAT = f"kbbot-bm25/2+{TOKENIZER_VERSION}+k1={K1},b={B}"
DOCUMENT_WEIGHT = 1.0
_EMPTY = "\u2400"  # bm25s needs a token per document
_LOAD_LOCK = threading.Lock()


def document_key(chunk_id: str) -> str:
    """The document version a chunk belongs to (chunk ids are `kb/document@vN#index`)."""
    return chunk_id.rsplit("#", 1)[0]


@dataclass
class KeywordIndex:
    chunk_ids: list[str]
    bm25: bm25s.BM25 | None  # None when the KB is empty
    # Document level: chunk position -> document position, and the documents' BM25 (None: one chunk each).
    chunk_documents: np.ndarray | None = None
    documents: bm25s.BM25 | None = None
    document_weight: float = field(default=DOCUMENT_WEIGHT)

    @classmethod
    def build(cls, chunk_ids: Sequence[str], texts: Sequence[str]) -> KeywordIndex:
        if not chunk_ids:
            return cls([], None)
        chunk_terms = [keyword_terms(t) or [_EMPTY] for t in texts]
        bm25 = bm25s.BM25(k1=K1, b=B)
        bm25.index(chunk_terms, show_progress=False)
        positions: dict[str, int] = {}
        doc_terms: list[list[str]] = []
        owner = np.empty(len(chunk_ids), dtype=np.int32)
        for i, (cid, text) in enumerate(zip(chunk_ids, texts, strict=True)):
            key = document_key(cid)
            if key not in positions:
                positions[key] = len(doc_terms)
                doc_terms.append(list(chunk_terms[i]))
            else:  # the header (first line) is the same in every chunk of a document: count it once
                body = text.split("\n", 1)[1] if "\n" in text else text
                doc_terms[positions[key]].extend(keyword_terms(body))
            owner[i] = positions[key]
        documents = None
        if len(doc_terms) < len(chunk_ids):
            documents = bm25s.BM25(k1=K1, b=B)
            documents.index([t or [_EMPTY] for t in doc_terms], show_progress=False)
        return cls(list(chunk_ids), bm25, owner if documents is not None else None, documents)

    def __post_init__(self) -> None:
        self.position = {cid: i for i, cid in enumerate(self.chunk_ids)}

    def knows(self, term: str) -> bool:
        """Whether an index term (as produced by keyword_terms) occurs in any chunk."""
        return self.bm25 is not None and term in self.bm25.vocab_dict

    def scores(self, query: str) -> np.ndarray | None:
        """BM25 score of every chunk for the query, chunk level + document level (None: no query
        term is in the index)."""
        if self.bm25 is None:
            return None
        terms = [t for t in keyword_terms(query) if t in self.bm25.vocab_dict]
        if not terms:
            return None
        scores = self.bm25.get_scores(terms)
        if self.documents is not None and self.chunk_documents is not None and self.document_weight:
            doc_terms = [t for t in terms if t in self.documents.vocab_dict]
            if doc_terms:
                doc_scores = self.documents.get_scores(doc_terms)
                scores = scores + self.document_weight * doc_scores[self.chunk_documents]
        return scores

    def term_counts(self, terms: set[str]) -> np.ndarray | None:
        """How many of these index terms each chunk (header included) contains, from the postings."""
        if self.bm25 is None:
            return None
        counts = np.zeros(len(self.chunk_ids), dtype=np.int32)
        indptr, indices = self.bm25.scores["indptr"], self.bm25.scores["indices"]
        for term in terms:
            tid = self.bm25.vocab_dict.get(term)
            if tid is not None:
                counts[indices[indptr[tid] : indptr[tid + 1]]] += 1
        return counts

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """(chunk_id, bm25 score) best first; only chunks sharing a term with the query."""
        scores = self.scores(query)
        if scores is None:
            return []
        return self.top(scores, k)

    def top(self, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
        k = min(k, len(scores))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(self.chunk_ids[i], float(scores[i])) for i in top if scores[i] > 0]

    def save(self, directory: Path) -> None:
        """Write the index to `directory` atomically: built under a unique temporary name, then renamed.

        Safe against concurrent savers of the same directory (threads or processes): the first complete
        index to land stays, the others are discarded (an index of one generation is the same whoever
        builds it); a reader sees the complete directory or none, never part of one. An existing index
        of another format is swapped out.
        """
        parent = directory.parent
        parent.mkdir(parents=True, exist_ok=True)
        _sweep_temporaries(parent)
        tmp = parent / f".{directory.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            tmp.mkdir()
            (tmp / "chunk_ids.json").write_text(json.dumps(self.chunk_ids), encoding="utf-8")
            if self.bm25 is not None:
                self.bm25.save(str(tmp / "bm25"))
            if self.documents is not None and self.chunk_documents is not None:
                self.documents.save(str(tmp / "documents"))
                np.save(tmp / "chunk_documents.npy", self.chunk_documents)
            # format.json last: a directory without it is never loaded
            (tmp / "format.json").write_text(json.dumps({"format": FORMAT}), encoding="utf-8")
            for _ in range(5):
                try:
                    os.rename(tmp, directory)  # atomic; refused when the directory exists (not empty)
                    return
                except OSError:
                    if not directory.exists():
                        continue  # swapped out meanwhile: try again
                    if _current_format(directory):
                        return  # another saver's index of this generation landed first: keep it
                    old = parent / f".{directory.name}.{uuid.uuid4().hex[:8]}.old"
                    with contextlib.suppress(OSError):
                        os.rename(directory, old)
                    shutil.rmtree(old, ignore_errors=True)
            raise OSError(f"could not save the keyword index to {directory}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path) -> KeywordIndex | None:
        """The saved index, or None when there is none or it was built by another format/tokenizer.

        Loads are serialised per process: numpy parses .npy headers with ast.literal_eval, which on
        CPython 3.11 can fail with "SystemError: AST constructor recursion depth mismatch" when two
        threads do it at once (seen in tests/reliability/test_races.py). A load per KB generation is rare.
        """
        with _LOAD_LOCK:
            return cls._load(directory)

    @classmethod
    def _load(cls, directory: Path) -> KeywordIndex | None:
        ids_file = directory / "chunk_ids.json"
        format_file = directory / "format.json"
        if not ids_file.is_file() or not format_file.is_file():
            return None
        if json.loads(format_file.read_text(encoding="utf-8")).get("format") != FORMAT:
            return None
        chunk_ids = json.loads(ids_file.read_text(encoding="utf-8"))
        bm25 = bm25s.BM25.load(str(directory / "bm25")) if chunk_ids else None
        documents = owner = None
        if (directory / "chunk_documents.npy").is_file():
            documents = bm25s.BM25.load(str(directory / "documents"))
            owner = np.load(directory / "chunk_documents.npy")
        return cls(chunk_ids, bm25, owner, documents)


def _current_format(directory: Path) -> bool:
    try:
        return json.loads((directory / "format.json").read_text(encoding="utf-8")).get("format") == FORMAT
    except (OSError, ValueError):
        return False


def _sweep_temporaries(parent: Path, older_than_s: float = 3600) -> None:
    """Remove temporary directories left by savers that died (kill -9) more than an hour ago."""
    now = time.time()
    for leftover in parent.glob(".*"):
        if leftover.name.endswith((".tmp", ".old")):
            with contextlib.suppress(OSError):
                if now - leftover.stat().st_mtime > older_than_s:
                    shutil.rmtree(leftover, ignore_errors=True)
