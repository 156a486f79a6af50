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

Incremental: a new generation is the previous one plus a delta (`updated`): the chunks of newly published
versions are appended after the base positions and scored with the base's statistics (its document
frequencies, document count and mean length; a term only the delta knows gets its delta frequency), and
chunks of retired versions are tombstoned (score 0). Publishing one document into a KB of a million
chunks then tokenizes that document only, instead of re-reading and re-indexing every chunk. Once the
delta outgrows DELTA_MAX_SHARE of the base (or DELTA_MIN_CHUNKS), the store rebuilds from scratch.

A saved base is memory-mapped, not read: a query touches only its terms' postings, so a large KB's index costs
page cache the kernel can reclaim instead of the process's own memory. Safe because a saved generation's files are
never rewritten: a new generation is a new directory (hard links for what it shares), and an old one is removed
whole, which leaves a mapped file readable.
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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import bm25s
import numpy as np

from tools.text import TOKENIZER_VERSION, keyword_terms

logging.getLogger("bm25s").setLevel(logging.WARNING)

# k1/b: the Anserini defaults (robust across BEIR), better than 1.2/0.75 in the fused ranking on SciFact train
# (docs/benchmarks.md): chunks are short and similar in length, so less length normalisation.
K1, B = 0.9, 0.4
FORMAT = f"kbbot-bm25/3+{TOKENIZER_VERSION}+k1={K1},b={B}"
DELTA_MIN_CHUNKS = 5000
DELTA_MAX_SHARE = 0.1
DOCUMENT_WEIGHT = 1.0
_EMPTY = "\u2400"  # bm25s needs a token per document
_LOAD_LOCK = threading.Lock()


def document_key(chunk_id: str) -> str:
    """The document version a chunk belongs to (chunk ids are `kb/document@vN#index`)."""
    return chunk_id.rsplit("#", 1)[0]


def version_of(chunk_id: str) -> str:
    """Alias of document_key: the `kb/document@vN` a chunk id belongs to."""
    return document_key(chunk_id)


@dataclass
class _Stats:
    """What BM25 needs of a base index to score further chunks as if they were in it."""

    n: int
    mean_length: float
    df: dict[str, int]

    @classmethod
    def of(cls, bm25: bm25s.BM25, lengths: Sequence[int]) -> _Stats:
        indptr = bm25.scores["indptr"]
        # bm25s' vocabulary can hold an entry past its postings (its empty-token placeholder): no postings
        df = {
            term: int(indptr[tid + 1] - indptr[tid]) for term, tid in bm25.vocab_dict.items() if tid + 1 < len(indptr)
        }
        return cls(len(lengths), float(np.mean(lengths)) if len(lengths) else 1.0, df)


class _Postings:
    """BM25 over a few appended texts, scored with a base's statistics (lucene variant, as bm25s).

    Per term, the positions holding it, its count there and the length norm: what a chunk contributes does not
    change when more are appended, so an update extends the postings of the terms it brings and shares the rest
    (rebuilding them would cost the whole delta per publish). The idf is taken at scoring time: a term only the
    delta knows gets its delta frequency, which every append changes."""

    def __init__(self, terms: list[list[str]], base: _Stats):
        self.size = 0  # texts appended
        self.base = base
        self.table: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # term -> positions, tf, norm
        self._append(terms)

    def extended(self, terms: list[list[str]]) -> _Postings:
        """These postings with `terms` appended (self is left as it is)."""
        out = _Postings.__new__(_Postings)
        out.size, out.base, out.table = self.size, self.base, dict(self.table)
        out._append(terms)
        return out

    def _append(self, terms: list[list[str]]) -> None:
        # Counted with arrays, not a dict of counts per term: at a delta of tens of thousands of chunks those
        # dicts held an object per term occurrence, and the memory they took stayed with the process.
        offset = self.size
        counts = np.array([len(t) for t in terms], dtype=np.int64)
        self.size += len(terms)
        vocabulary: dict[str, int] = {}
        term_ids = np.fromiter(
            (vocabulary.setdefault(term, len(vocabulary)) for chunk_terms in terms for term in chunk_terms),
            dtype=np.int64,
            count=int(counts.sum()),
        )
        rows = np.repeat(np.arange(len(terms), dtype=np.int64), counts)
        if not len(term_ids):
            return
        pairs, tfs = np.unique(term_ids * len(terms) + rows, return_counts=True)  # by term, then row
        pair_terms, pair_rows = np.divmod(pairs, len(terms))
        starts = np.flatnonzero(np.r_[True, pair_terms[1:] != pair_terms[:-1]])
        names = list(vocabulary)
        lengths = counts.astype(np.float32)
        for start, end in zip(starts, [*starts[1:], len(pairs)], strict=True):
            term = names[pair_terms[start]]
            rows_of_term = pair_rows[start:end]
            positions = rows_of_term + offset
            tf = tfs[start:end].astype(np.float32)
            norm = K1 * ((1 - B) + B * lengths[rows_of_term] / self.base.mean_length)
            held = self.table.get(term)
            if held is not None:
                positions, tf, norm = (np.concatenate(pair) for pair in zip(held, (positions, tf, norm), strict=True))
            self.table[term] = positions, tf, norm

    def entry(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(positions, scores) of a term, None when no appended text has it."""
        held = self.table.get(term)
        if held is None:
            return None
        positions, tf, norm = held
        df = self.base.df.get(term) or len(positions)
        n_term = self.base.n if term in self.base.df else self.base.n + self.size
        idf = np.log1p((n_term - df + 0.5) / (df + 0.5))
        return positions, (idf * tf / (norm + tf)).astype(np.float32)

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.float32)
        for term in terms:
            hit = self.entry(term)
            if hit is not None:
                out[hit[0]] += hit[1]
        return out


@dataclass
class _Delta:
    """Chunks appended after a base index: their terms, their documents' terms, chunk -> document.

    A text's terms are held packed, one string per chunk or document (`_packed`): as lists, every term occurrence
    was a string object of its own, and a large delta cost the process more memory than its memory-mapped base."""

    chunk_terms: list[str] = field(default_factory=list)
    document_terms: list[str] = field(default_factory=list)
    chunk_documents: list[int] = field(default_factory=list)  # global document positions

    @classmethod
    def from_lists(cls, chunk_terms: list[list[str]], document_terms: list[list[str]], chunk_documents: list[int]):
        return cls([_packed(t) for t in chunk_terms], [_packed(t) for t in document_terms], list(chunk_documents))


def _packed(terms: Sequence[str]) -> str:
    """A text's terms as one string; terms never hold whitespace (tools.text splits on it)."""
    return " ".join(terms)


def _unpacked(terms: str) -> list[str]:
    return terms.split(" ")


class _Positions(Mapping[str, int]):
    """Chunk id -> position of the live chunks, in layers: the base's map (built once per loaded base and shared
    by every update of it), the delta's, and the tombstones. An update copies the delta's layer only, so
    publishing into a KB of a million chunks does not rebuild a million-entry map."""

    def __init__(self, base: dict[str, int], added: dict[str, int], removed: frozenset[int]):
        self._base, self._added, self._removed = base, added, removed

    def __getitem__(self, chunk_id: str) -> int:
        position = self._added.get(chunk_id)
        if position is None:
            position = self._base[chunk_id]
        if position in self._removed:
            raise KeyError(chunk_id)
        return position

    def get(self, chunk_id: str, default: int | None = None) -> int | None:  # type: ignore[override]
        try:
            return self[chunk_id]
        except KeyError:
            return default

    def __contains__(self, chunk_id: object) -> bool:
        return self.get(chunk_id) is not None  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[str]:
        for layer in (self._base, self._added):
            for chunk_id, position in layer.items():
                if position not in self._removed:
                    yield chunk_id

    def __len__(self) -> int:
        return len(self._base) + len(self._added) - len(self._removed)


def _fields_of(record: _Stats) -> dict:
    """A record's fields as they are, for json.dumps (dataclasses.asdict would deep-copy every one first)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass
class KeywordIndex:
    chunk_ids: list[str]  # every position, tombstoned ones included (see live_chunk_ids)
    bm25: bm25s.BM25 | None  # None when the KB is empty
    # Document level: chunk position -> document position, and the documents' BM25 (None: one chunk each).
    chunk_documents: np.ndarray | None = None
    documents: bm25s.BM25 | None = None
    document_weight: float = field(default=DOCUMENT_WEIGHT)
    base_size: int = -1  # positions of the base (bm25s) index; the rest is the delta
    delta: _Delta = field(default_factory=_Delta)
    removed: frozenset[int] = frozenset()  # tombstoned positions
    # The base's identity: indexes that share it have the same positions for the base and their common delta.
    lineage: str = field(default_factory=lambda: uuid.uuid4().hex)
    stats: tuple[_Stats, _Stats | None] | None = None  # chunk level, document level
    # The delta's postings (chunk level, document level) when an update extended its predecessor's; else built.
    postings: tuple[_Postings | None, _Postings | None] | None = field(default=None, repr=False, compare=False)

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
        stats = (
            _Stats.of(bm25, [len(t) for t in chunk_terms]),
            _Stats.of(documents, [len(t or [_EMPTY]) for t in doc_terms]) if documents is not None else None,
        )
        return cls(list(chunk_ids), bm25, owner if documents is not None else None, documents, stats=stats)

    def __post_init__(self) -> None:
        if self.base_size < 0:
            self.base_size = len(self.chunk_ids)
        # The position map is built when first asked for; an update hands its base layer on (see _Positions).
        self._base_positions: dict[str, int] | None = None
        self._positions: _Positions | None = None
        self._chunk_delta = self._document_delta = None
        if self.postings is not None:
            self._chunk_delta, self._document_delta = self.postings
            self.postings = None
        elif self.delta.chunk_terms and self.stats is not None:
            self._chunk_delta = _Postings(list(map(_unpacked, self.delta.chunk_terms)), self.stats[0])
            if self.delta.document_terms and self.stats[1] is not None:
                self._document_delta = _Postings(list(map(_unpacked, self.delta.document_terms)), self.stats[1])
        self._segments: tuple[_Segment, ...] = ()  # saved files holding a prefix of the delta (see save)
        self._live_versions: frozenset[str] | None = None  # worked out once per index (a pass over every id)
        self._removed_mask = None
        if self.removed:
            self._removed_mask = np.zeros(len(self.chunk_ids), dtype=bool)
            self._removed_mask[list(self.removed)] = True

    @property
    def position(self) -> Mapping[str, int]:
        """Chunk id -> position, live chunks only."""
        if self._positions is None:
            if self._base_positions is None:
                self._base_positions = dict(zip(self.chunk_ids[: self.base_size], range(self.base_size), strict=True))
            delta_ids = self.chunk_ids[self.base_size :]
            added = dict(zip(delta_ids, range(self.base_size, len(self.chunk_ids)), strict=True))
            self._positions = _Positions(self._base_positions, added, self.removed)
        return self._positions

    def holds_version(self, version: str) -> bool:
        """Whether this index holds live chunks of the version `kb/document@vN` (its chunk #0: the store numbers
        a version's chunks from 0)."""
        return f"{version}#0" in self.position

    def _version_positions(self, version: str) -> list[int] | None:
        """The positions of a live version's chunks, without a pass over every id: a version's chunks sit next to
        each other (a build reads them sorted by document, an update appends them together), so they are found
        by walking out from its chunk #0. None when its chunk #0 is not indexed."""
        first = self.position.get(f"{version}#0")
        if first is None:
            return None
        start = first
        while start > 0 and document_key(self.chunk_ids[start - 1]) == version:
            start -= 1
        end = first + 1
        while end < len(self.chunk_ids) and document_key(self.chunk_ids[end]) == version:
            end += 1
        return [i for i in range(start, end) if i not in self.removed]

    @property
    def delta_size(self) -> int:
        return len(self.chunk_ids) - self.base_size

    def live_chunk_ids(self) -> list[str]:
        return [cid for i, cid in enumerate(self.chunk_ids) if i not in self.removed]

    def live_versions(self) -> set[str]:
        """The document versions (`kb/document@vN`) this index holds live chunks of."""
        if self._live_versions is None:
            self._live_versions = frozenset(document_key(cid) for cid in self.position)
        return set(self._live_versions)

    def removed_mask(self) -> np.ndarray | None:
        return self._removed_mask

    def knows(self, term: str) -> bool:
        """Whether an index term (as produced by keyword_terms) occurs in any chunk."""
        if self.bm25 is None:
            return False
        return term in self.bm25.vocab_dict or (self._chunk_delta is not None and term in self._chunk_delta.table)

    def scores(self, query: str) -> np.ndarray | None:
        """BM25 score of every chunk for the query, chunk level + document level (None: no query
        term is in the index)."""
        if self.bm25 is None:
            return None
        terms = [t for t in keyword_terms(query) if self.knows(t)]
        if not terms:
            return None
        base_terms = [t for t in terms if t in self.bm25.vocab_dict]
        scores = self.bm25.get_scores(base_terms) if base_terms else np.zeros(self.base_size, dtype=np.float32)
        if self._chunk_delta is not None:
            scores = np.concatenate([scores, self._chunk_delta.scores(terms)])
        if self.documents is not None and self.chunk_documents is not None and self.document_weight:
            doc_terms = [t for t in terms if t in self.documents.vocab_dict]
            doc_scores = (
                self.documents.get_scores(doc_terms)
                if doc_terms
                else np.zeros(self.documents.scores["num_docs"], dtype=np.float32)
            )
            if self._document_delta is not None:
                doc_scores = np.concatenate([doc_scores, self._document_delta.scores(terms)])
            owner = self.all_chunk_documents()
            if doc_terms or self._document_delta is not None:
                scores = scores + self.document_weight * doc_scores[owner]
        if self._removed_mask is not None:
            scores = np.where(self._removed_mask, 0.0, scores).astype(np.float32)
        return scores

    def all_chunk_documents(self) -> np.ndarray | None:
        """Chunk position -> document position, base and delta (None: no document level)."""
        if self.chunk_documents is None:
            return None
        if not self.delta.chunk_documents:
            return self.chunk_documents
        return np.concatenate([self.chunk_documents, np.asarray(self.delta.chunk_documents, dtype=np.int32)])

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
            hit = self._chunk_delta.table.get(term) if self._chunk_delta is not None else None
            if hit is not None:
                counts[self.base_size + hit[0]] += 1  # positions are unique per term: one count each
        return counts

    def updated(self, added_ids: Sequence[str], added_texts: Sequence[str], removed_versions: set[str]) -> KeywordIndex:
        """This index with chunks appended (new versions, whole documents) and retired versions tombstoned.

        Raises ValueError when it cannot be done incrementally (an empty base, or an id already indexed):
        the caller rebuilds instead."""
        if self.bm25 is None or self.stats is None:
            raise ValueError("an empty index is rebuilt, not extended")
        if any(cid in self.position for cid in added_ids):
            raise ValueError("a chunk is indexed already")
        base_documents = int(self.documents.scores["num_docs"]) if self.documents is not None else None
        new_chunks: list[list[str]] = []
        new_documents: list[list[str]] = []
        chunk_documents = list(self.delta.chunk_documents)
        seen: dict[str, int] = {}  # document key -> its position in the delta's documents
        for cid, text in zip(added_ids, added_texts, strict=True):
            terms = keyword_terms(text) or [_EMPTY]
            new_chunks.append(terms)
            if base_documents is not None:
                key = document_key(cid)
                if key not in seen:
                    seen[key] = len(self.delta.document_terms) + len(new_documents)
                    new_documents.append(list(terms))
                else:  # the header is the same in every chunk of a document: counted once
                    body = text.split("\n", 1)[1] if "\n" in text else text
                    new_documents[seen[key] - len(self.delta.document_terms)].extend(keyword_terms(body))
                chunk_documents.append(base_documents + seen[key])
        delta = _Delta(
            [*self.delta.chunk_terms, *map(_packed, new_chunks)],
            [*self.delta.document_terms, *map(_packed, new_documents)],
            chunk_documents,
        )
        removed = set(self.removed)
        unfound = set()
        for version in removed_versions:
            positions = self._version_positions(version)
            if positions is None:
                unfound.add(version)
            else:
                removed.update(positions)
        if unfound:  # chunks not numbered from 0 (never written by the store): a pass over every live id
            removed.update(i for cid, i in self.position.items() if document_key(cid) in unfound)
        chunk_postings, document_postings = self._chunk_delta, self._document_delta
        if new_chunks:
            chunk_postings = (
                chunk_postings.extended(new_chunks) if chunk_postings else _Postings(new_chunks, self.stats[0])
            )
        if new_documents and self.stats[1] is not None:
            document_postings = (
                document_postings.extended(new_documents)
                if document_postings
                else _Postings(new_documents, self.stats[1])
            )
        index = KeywordIndex(
            [*self.chunk_ids, *added_ids],
            self.bm25,
            self.chunk_documents,
            self.documents,
            self.document_weight,
            self.base_size,
            delta,
            frozenset(removed),
            self.lineage,
            self.stats,
            postings=(chunk_postings, document_postings),
        )
        index._segments = self._segments  # the delta only grew: what was saved of it still holds
        index._base_positions = self._base_positions  # the base never changes: its map is shared
        if self._live_versions is not None:  # carried forward: the next update needs no pass over every id
            index._live_versions = (self._live_versions - removed_versions) | {document_key(c) for c in added_ids}
        return index

    def wants_rebuild(self) -> bool:
        """The delta outgrew what scoring with the base's statistics should carry."""
        return self.delta_size + len(self.removed) > max(DELTA_MIN_CHUNKS, DELTA_MAX_SHARE * self.base_size)

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
            linked = _link_base(self, parent, tmp)  # the base is immutable: an update links the saved one
            if not (tmp / "base_ids.json").is_file():  # a fresh build, or no saved base of this lineage
                (tmp / "base_ids.json").write_text(json.dumps(self.chunk_ids[: self.base_size]), encoding="utf-8")
            if not linked:
                if self.bm25 is not None:
                    self.bm25.save(str(tmp / "bm25"))
                if self.documents is not None and self.chunk_documents is not None:
                    self.documents.save(str(tmp / "documents"))
                    np.save(tmp / "chunk_documents.npy", self.chunk_documents)
                if self.stats is not None:
                    (tmp / "stats.json").write_text(
                        json.dumps([_fields_of(s) if s is not None else None for s in self.stats]), encoding="utf-8"
                    )
            segments = self._save_delta(parent, tmp)
            (tmp / "delta.json").write_text(
                json.dumps(
                    {
                        "base_size": self.base_size,
                        "lineage": self.lineage,
                        "removed": sorted(self.removed),
                        "segments": [[seg.name, seg.chunks, seg.documents] for seg in segments],
                    }
                ),
                encoding="utf-8",
            )
            # format.json last: a directory without it is never loaded
            (tmp / "format.json").write_text(json.dumps({"format": FORMAT}), encoding="utf-8")
            for _ in range(5):
                try:
                    os.rename(tmp, directory)  # atomic; refused when the directory exists (not empty)
                    self._segments = segments
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

    def _save_delta(self, parent: Path, target: Path) -> tuple[_Segment, ...]:
        """Write the delta into `target` as segments: those an earlier save wrote of it (a prefix: the delta only
        grows) are hard-linked from a saved index that has them, and only what was appended since is written, so a
        save costs the publish, not the whole delta (up to a tenth of the base). Everything is written as one
        segment when the earlier ones cannot be linked."""
        kept = _link_segments(self._segments, parent, target)
        chunks, documents = sum(seg.chunks for seg in kept), sum(seg.documents for seg in kept)
        if chunks == self.delta_size and documents == len(self.delta.document_terms):
            return kept
        name = f"delta-{uuid.uuid4().hex[:16]}.json"
        segment = _Segment(name, self.delta_size - chunks, len(self.delta.document_terms) - documents)
        (target / segment.name).write_text(
            json.dumps(
                {
                    "ids": self.chunk_ids[self.base_size + chunks :],
                    "packed_chunk_terms": self.delta.chunk_terms[chunks:],
                    "packed_document_terms": self.delta.document_terms[documents:],
                    "chunk_documents": self.delta.chunk_documents[chunks:],
                }
            ),
            encoding="utf-8",
        )
        return (*kept, segment)

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
        # Two layouts of the same format: base_ids.json (the base's ids) + the delta in segment files, both linked
        # from save to save; or, as kbbot wrote before, every id in chunk_ids.json and the delta in delta.json.
        ids_file = directory / "chunk_ids.json"
        base_ids_file = directory / "base_ids.json"
        format_file = directory / "format.json"
        if not (ids_file.is_file() or base_ids_file.is_file()) or not format_file.is_file():
            return None
        if json.loads(format_file.read_text(encoding="utf-8")).get("format") != FORMAT:
            return None
        extra = json.loads((directory / "delta.json").read_text(encoding="utf-8"))
        segments: tuple[_Segment, ...] = ()
        if "segments" in extra:
            chunk_ids = json.loads(base_ids_file.read_text(encoding="utf-8"))[: int(extra["base_size"])]
            delta = _Delta()
            segments = tuple(_Segment(str(name), int(c), int(d)) for name, c, d in extra["segments"])
            for segment in segments:
                part = json.loads((directory / segment.name).read_text(encoding="utf-8"))
                chunk_ids += part["ids"]
                if "packed_chunk_terms" in part:
                    delta.chunk_terms += part["packed_chunk_terms"]
                    delta.document_terms += part["packed_document_terms"]
                else:  # a segment kbbot wrote before terms were packed
                    delta.chunk_terms += map(_packed, part["chunk_terms"])
                    delta.document_terms += map(_packed, part["document_terms"])
                delta.chunk_documents += part["chunk_documents"]
        else:
            chunk_ids = json.loads(ids_file.read_text(encoding="utf-8"))
            delta = _Delta.from_lists(**extra["delta"])
        bm25 = bm25s.BM25.load(str(directory / "bm25"), mmap=True) if chunk_ids else None
        documents = owner = None
        if (directory / "chunk_documents.npy").is_file():
            documents = bm25s.BM25.load(str(directory / "documents"), mmap=True)
            owner = np.load(directory / "chunk_documents.npy", mmap_mode="r")
        stats = None
        if bm25 is not None:
            chunk_stats, document_stats = json.loads((directory / "stats.json").read_text(encoding="utf-8"))
            stats = (_Stats(**chunk_stats), _Stats(**document_stats) if document_stats else None)
        index = cls(
            chunk_ids,
            bm25,
            owner,
            documents,
            base_size=int(extra["base_size"]),
            delta=delta,
            removed=frozenset(extra["removed"]),
            lineage=str(extra["lineage"]),
            stats=stats,
        )
        index._segments = segments
        return index


@dataclass(frozen=True)
class _Segment:
    """A saved file holding part of the delta: its name, chunks and documents (in the delta's order)."""

    name: str
    chunks: int
    documents: int


def _link_segments(segments: tuple[_Segment, ...], parent: Path, target: Path) -> tuple[_Segment, ...]:
    """Hard-link these segment files from a saved index that has them all into `target`; () when none has."""
    if not segments:
        return ()
    for saved in parent.glob("g*"):
        if not all((saved / seg.name).is_file() for seg in segments):
            continue
        try:
            for seg in segments:
                os.link(saved / seg.name, target / seg.name)
            return segments
        except OSError as exc:
            logging.getLogger(__name__).debug("delta of %s not linked: %s", saved, exc)
            for seg in segments:
                (target / seg.name).unlink(missing_ok=True)
    return ()


_BASE_FILES = ("bm25", "documents", "chunk_documents.npy", "stats.json", "base_ids.json")


def _link_base(index: KeywordIndex, parent: Path, target: Path) -> bool:
    """Hard-link the base files of a saved index of the same lineage into `target` (an update re-writes only
    its ids and delta: the base of a million chunks is hundreds of MB). False when there is none to link."""
    if index.base_size == len(index.chunk_ids) and not index.removed:
        return False  # a fresh build: nothing saved to share
    for saved in parent.glob("g*"):
        try:
            if not _current_format(saved):
                continue
            extra = json.loads((saved / "delta.json").read_text(encoding="utf-8"))
            if extra.get("lineage") != index.lineage:
                continue
            for name in _BASE_FILES:
                source = saved / name
                if name == "base_ids.json" and not source.is_file():
                    # The earlier layout's chunk_ids.json: every id of its generation, the base's first (positions
                    # never move), so linking it spares writing a million ids once; a load reads base_size of them.
                    source = saved / "chunk_ids.json"
                if source.is_dir():
                    (target / name).mkdir()
                    for file in source.iterdir():
                        os.link(file, target / name / file.name)
                elif source.is_file():
                    os.link(source, target / name)
            return True
        except (OSError, ValueError) as exc:
            logging.getLogger(__name__).debug("base of %s not linked: %s", saved, exc)
            for name in _BASE_FILES:  # whatever was linked goes; the caller writes the base itself
                path = target / name
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    return False


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
