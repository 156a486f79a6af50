"""Keyword (BM25) index of a KB's live chunks.

Local Chroma has no sparse index, so this one is derived from the stored chunks with bm25s and our
own tokenizer (stemmed English, CJK character bigrams). It is persisted per KB generation, so every
process (Slack bot, CLI) sees the same index and rebuilds only after the KB changed.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from tools.text import keyword_terms

logging.getLogger("bm25s").setLevel(logging.WARNING)


@dataclass
class KeywordIndex:
    chunk_ids: list[str]
    bm25: bm25s.BM25 | None  # None when the KB is empty

    @classmethod
    def build(cls, chunk_ids: Sequence[str], texts: Sequence[str]) -> KeywordIndex:
        if not chunk_ids:
            return cls([], None)
        corpus_terms = [keyword_terms(t) or ["\u2400"] for t in texts]  # bm25s needs a token per doc
        bm25 = bm25s.BM25(k1=1.2, b=0.75)
        bm25.index(corpus_terms, show_progress=False)
        return cls(list(chunk_ids), bm25)

    def __post_init__(self) -> None:
        self.position = {cid: i for i, cid in enumerate(self.chunk_ids)}

    def knows(self, term: str) -> bool:
        """Whether an index term (as produced by keyword_terms) occurs in any chunk."""
        return self.bm25 is not None and term in self.bm25.vocab_dict

    def scores(self, query: str) -> np.ndarray | None:
        """BM25 score of every chunk for the query (None: no query term is in the index)."""
        if self.bm25 is None:
            return None
        terms = [t for t in keyword_terms(query) if t in self.bm25.vocab_dict]
        if not terms:
            return None
        return self.bm25.get_scores(terms)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """(chunk_id, bm25 score) best first; only chunks sharing a term with the query."""
        scores = self.scores(query)
        if scores is None:
            return []
        return self.top(scores, k)

    def top(self, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(self.chunk_ids[i], float(scores[i])) for i in top if scores[i] > 0]

    def save(self, directory: Path) -> None:
        tmp = directory.with_name(directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        (tmp / "chunk_ids.json").write_text(json.dumps(self.chunk_ids), encoding="utf-8")
        if self.bm25 is not None:
            self.bm25.save(str(tmp / "bm25"))
        shutil.rmtree(directory, ignore_errors=True)
        tmp.rename(directory)

    @classmethod
    def load(cls, directory: Path) -> KeywordIndex | None:
        ids_file = directory / "chunk_ids.json"
        if not ids_file.is_file():
            return None
        chunk_ids = json.loads(ids_file.read_text(encoding="utf-8"))
        bm25 = bm25s.BM25.load(str(directory / "bm25")) if chunk_ids else None
        return cls(chunk_ids, bm25)
