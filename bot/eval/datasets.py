"""Benchmark data readers. Data stays in ../shared/datasets (or wherever --dataset points)."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bot.config import REPO_ROOT

DEFAULT_ROOT = REPO_ROOT.parent / "shared" / "datasets"


class DatasetError(ValueError):
    """A dataset that is missing or malformed; the message says which file and why."""


def resolve(name_or_path: str | Path, root: Path | None = None) -> Path:
    """A dataset directory: an existing path as given, else a folder of the default datasets root."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path.resolve()
    candidate = (root or DEFAULT_ROOT) / str(name_or_path)
    if candidate.is_dir():
        return candidate.resolve()
    raise DatasetError(f"dataset {str(name_or_path)!r} not found (looked at {path} and {candidate})")


def read_jsonl(path: Path) -> Iterator[dict]:
    if not path.is_file():
        raise DatasetError(f"missing {path}")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{number}: not JSON ({exc})") from exc


def file_digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@dataclass
class BeirDataset:
    name: str
    path: Path
    corpus: dict[str, tuple[str, str]]  # doc id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    split: str = "test"
    digest: str = field(default="")

    def judged_queries(self) -> dict[str, str]:
        return {q: self.queries[q] for q in self.qrels if q in self.queries}


def load_beir(path: Path, split: str = "test") -> BeirDataset:
    corpus = {}
    for row in read_jsonl(path / "corpus.jsonl"):
        corpus[str(row["_id"])] = (str(row.get("title") or ""), str(row.get("text") or ""))
    queries = {str(r["_id"]): str(r["text"]) for r in read_jsonl(path / "queries.jsonl")}
    qrels_file = path / "qrels" / f"{split}.tsv"
    if not qrels_file.is_file():
        available = sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
        raise DatasetError(f"no split {split!r} in {path} (qrels: {', '.join(available) or 'none'})")
    qrels: dict[str, dict[str, int]] = {}
    with qrels_file.open(encoding="utf-8") as handle:
        for row in csv.reader(handle, delimiter="\t"):
            if not row or row[0] == "query-id":
                continue
            qid, doc, score = row[0], row[1], int(float(row[2]))
            if doc in corpus and qid in queries:
                qrels.setdefault(qid, {})[doc] = score
    return BeirDataset(path.name, path, corpus, queries, qrels, split, file_digest(path / "corpus.jsonl"))
