"""Where benchmark KBs live: a store of their own under the data dir, reused while nothing changed."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

from bot.config import Settings, load_settings
from bot.core import IngestReport, KnowledgeBot, Origin
from bot.eval.embcache import CachingEmbedder, EmbeddingCache


@dataclass
class KbBuild:
    kb: str
    fingerprint: str
    documents: int
    chunks: int
    ingest_s: float
    cache_hits: int
    cache_misses: int
    built_at: str
    reused: bool = False

    @property
    def docs_per_s(self) -> float:
        return self.documents / self.ingest_s if self.ingest_s else 0.0

    @property
    def used_cache(self) -> bool:
        return self.cache_hits > 0

    def to_json(self) -> dict:
        data = asdict(self)
        data["docs_per_s"] = round(self.docs_per_s, 2)
        data["used_cache"] = self.used_cache
        return data


def pipeline_fingerprint(*parts: str, settings: Settings | None = None) -> str:
    """Changes whenever the corpus, the model, the chunking or what ingest stores changes: then a KB is rebuilt."""
    digest = hashlib.sha256()
    for part in (*parts, *KnowledgeBot.pipeline_identity(settings or load_settings())):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


class EvalWorkspace:
    def __init__(
        self, base: Settings | None = None, data_dir: Path | None = None, use_cache: bool = True, progress: bool = True
    ):
        base = base or load_settings()
        self.dir = (data_dir or base.resolved_data_dir / "eval").expanduser().resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.settings = load_settings(data_dir=self.dir / "store")
        self.cache = EmbeddingCache(self.dir / "embeddings.sqlite3") if use_cache else None
        # The real application (same store, ingest pipeline, search, engine), with a corpus-embedding cache.
        self.bot = KnowledgeBot(self.settings, wrap_embedder=lambda inner: CachingEmbedder(inner, self.cache))
        self.origin = Origin.cli()  # benchmark KBs are built and replaced as an operator would
        self.progress = progress

    def log(self, message: str) -> None:
        if self.progress:
            print(message, file=sys.stderr, flush=True)

    @cached_property
    def baseline_client(self):
        """A Chroma store of the baselines' own (kbbot's store belongs to kbbot)."""
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        return chromadb.PersistentClient(
            path=str(self.dir / "baselines"), settings=ChromaSettings(anonymized_telemetry=False)
        )

    @property
    def embedder(self) -> CachingEmbedder:
        return self.bot.embedder  # type: ignore[return-value]

    def ensure_kb(
        self,
        kb: str,
        description: str,
        records: Sequence[tuple[str, str, str]],
        corpus_digest: str,
        fresh: bool = False,
    ) -> KbBuild:
        """The KB holding exactly these (name, title, text) records, ingested by the real pipeline."""
        return self._ensure(
            kb,
            description,
            corpus_digest,
            len(records),
            lambda: self.bot.ingest_records(self.origin, kb, records, progress=self.progress),
            fresh,
        )

    def ensure_kb_from_folder(self, kb: str, description: str, folder: Path, fresh: bool = False) -> KbBuild:
        """The KB holding exactly the documents of `folder` (named as in it), ingested from the files as a
        person's `kbbot ingest` would: parsed by the real parser, so pdf, docx and html count too."""
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        digest = hashlib.sha256()
        for path in files:
            digest.update(str(path.relative_to(folder)).encode())
            digest.update(b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        return self._ensure(
            kb,
            description,
            digest.hexdigest(),
            len(files),
            lambda: self.bot.ingest_paths(self.origin, kb, [folder], progress=self.progress),
            fresh,
        )

    def _ensure(
        self,
        kb: str,
        description: str,
        corpus_digest: str,
        documents: int,
        ingest: Callable[[], IngestReport],
        fresh: bool,
    ) -> KbBuild:
        # The collection identity, not the runtime: a KB built by torch serves float32 ONNX as it serves torch
        # (same identity), and that is what an eval under ONNX then measures. Fresh builds embed with the
        # configured runtime (the embedding cache keys on it).
        fingerprint = pipeline_fingerprint(corpus_digest, self.embedder.model_name, description, settings=self.settings)
        sidecar = self.dir / "kbs" / f"{kb}.json"
        if not fresh and sidecar.is_file() and self.bot.kb_exists(kb):
            data = json.loads(sidecar.read_text(encoding="utf-8"))
            if data.get("fingerprint") == fingerprint:
                data["reused"] = True
                return KbBuild(**data)
        if self.bot.kb_exists(kb):
            self.bot.delete_kb(self.origin, kb)
        self.bot.create_kb(self.origin, kb, description)
        self.log(f"[{kb}] ingesting {documents} documents through the kbbot pipeline…")
        hits0, misses0 = self.embedder.counters()
        started = time.perf_counter()
        report = ingest()
        elapsed = time.perf_counter() - started
        hits1, misses1 = self.embedder.counters()
        if not report.ok:
            failed = [d for d in report.documents if d.status == "failed"]
            raise RuntimeError(f"ingest of {kb} failed for {len(failed)} documents, e.g. {failed[0].error}")
        build = KbBuild(
            kb,
            fingerprint,
            documents,
            report.embedded_chunks,
            round(elapsed, 2),
            hits1 - hits0,
            misses1 - misses0,
            time.strftime("%Y-%m-%d %H:%M:%S"),
        )
        sidecar.parent.mkdir(parents=True, exist_ok=True)
        sidecar.write_text(json.dumps(asdict(build)), encoding="utf-8")
        return build
