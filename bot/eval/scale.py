"""`kbbot eval scale`: search, ask, memory, disk, cold start and publishing at 100k–1M chunks.

How a KB of N chunks is made (docs/benchmarks.md, "Scale"):

1. **Real documents, real vectors.** The corpora of the benchmark datasets (scifact, cranfield, cisi
   as BEIR layouts; squad2-sample paragraphs; mtrag-un passages) are ingested through the real
   pipeline (`KnowledgeBot.ingest_records`: chunking with MiniLM's tokenizer, Chroma, the registry,
   answer-unit vectors, keyword index), with the eval embedding cache in front of the model: the
   records are exactly those the other benchmarks ingest, so their vectors are cache hits (real MiniLM
   vectors). At most N/10 documents (about 20 % of the chunks) come from here.
2. **Recombined documents, synthesised vectors.** The rest are variants of the titled documents
   (scifact, cranfield, cisi): a variant keeps its source's sentences in order, each replaced with
   probability `SWAP_SHARE` by a random sentence of another document of the same corpus, and is titled
   "<source title> (variant k)". It goes through the same ingest path; only the embedding step is
   replaced (`SynthesisingEmbedder`): a chunk's vector is the real vector of one of its source
   document's chunks (picked by a hash of the chunk text) plus Gaussian noise of norm `NOISE_RATIO`
   times the vector's, renormalised — cosine ≈ 1/sqrt(1 + NOISE_RATIO²) ≈ 0.95 to the source vector;
   its answer-unit vectors are the source chunk's unit vectors (cycled) with the same noise. Embedding
   100k+ chunks with MiniLM would take hours on a 2-core machine. Queries are always encoded by the
   real model, so dense scores are real cosines against near-real document vectors.

Measured per size and store mode (embedded Chroma, or a real `chroma run` server on 127.0.0.1; with
`--serve-embedded-build` the server serves the embedded build's own Chroma directory), in a
fresh child process that owns the store: cold start (process spawn → first answer: imports, model,
keyword index and vector snapshot loading), warm `search` and `ask` (offline engine, `KnowledgeBot.ask`
from an eval Origin) p50/p95 over dataset queries, peak RSS, and the time to publish one new document
(real embedding) into the big KB, then the first answer after it. Disk is measured after the run.
Not part of `kbbot eval all`: a 100k build takes tens of minutes here, 1M hours. A build resumes where it
stopped and a larger size extends a smaller build of the same recipe (`build`); its progress is in the
sidecar beside the KB.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bot.config import REPO_ROOT, load_settings
from bot.eval.datasets import DatasetError, load_beir, read_jsonl, resolve
from bot.eval.metrics import percentile
from bot.eval.workspace import EvalWorkspace, pipeline_fingerprint

KB = "scale"
DESCRIPTION = "A large mixed corpus: scientific abstracts, aeronautics, library science, Wikipedia, finance, docs."
DEFAULT_DATASETS = ("scifact", "cranfield", "cisi", "squad2-sample", "mtrag-un")
QUERY_DATASETS = ("scifact", "cranfield", "cisi")
SWAP_SHARE = 0.3
NOISE_RATIO = 0.33
SYNTHESIS_VERSION = "scale-synth-1"
BATCH_DOCUMENTS = 20_000  # per ingest call: each ends with a keyword-index update of the whole KB
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


# --- source documents ---------------------------------------------------------------------------


def source_records(datasets: Sequence[str]) -> dict[str, list[tuple[str, str, str]]]:
    """(name, title, text) per document and corpus, exactly as the other benchmarks ingest them."""
    from bot.eval.abstention import squad_records
    from bot.eval.multiturn import passage_records

    corpora: dict[str, list[tuple[str, str, str]]] = {}
    for name in datasets:
        path = resolve(name)
        if (path / "corpus.jsonl").is_file():
            from bot.eval.retrieval import records_of

            split = "test" if (path / "qrels" / "test.tsv").is_file() else _any_split(path)
            corpora[path.name] = records_of(load_beir(path, split))
        elif (path / "questions.jsonl").is_file():
            corpora[path.name] = squad_records(list(read_jsonl(path / "questions.jsonl")))
        elif (path / "tasks.jsonl").is_file():
            for collection, records in passage_records(list(read_jsonl(path / "tasks.jsonl"))).items():
                corpora[f"{path.name}-{collection}"] = records
        else:
            raise DatasetError(f"{path}: neither a BEIR layout, a SQuAD sample nor MTRAG tasks")
    # Names prefixed by their corpus (cranfield and cisi both have a document "1"); the embedding cache is
    # keyed by text, so the vectors are still those of the other benchmarks.
    return {corpus: [(f"{corpus}/{n}", t, x) for n, t, x in records] for corpus, records in corpora.items()}


def _any_split(path: Path) -> str:
    splits = sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
    if not splits:
        raise DatasetError(f"{path}: no qrels")
    return splits[0]


def interleave(corpora: dict[str, list[tuple[str, str, str]]], limit: int) -> list[tuple[str, str, str]]:
    """Up to `limit` documents taken round-robin from the corpora (each corpus in its own order)."""
    picked: list[tuple[str, str, str]] = []
    iterators = [iter(records) for records in corpora.values()]
    while iterators and len(picked) < limit:
        alive = []
        for it in iterators:
            record = next(it, None)
            if record is not None and len(picked) < limit:
                picked.append(record)
                alive.append(it)
        iterators = alive
    return picked


def queries_of(datasets: Sequence[str], count: int) -> list[str]:
    """Benchmark questions, round-robin over the BEIR datasets among `datasets`."""
    lists = []
    for name in datasets:
        path = resolve(name)
        if (path / "queries.jsonl").is_file():
            lists.append([str(r["text"]) for r in read_jsonl(path / "queries.jsonl") if str(r.get("text", "")).strip()])
    out: list[str] = []
    for i in range(max((len(x) for x in lists), default=0)):
        for queries in lists:
            if i < len(queries) and len(out) < count:
                out.append(queries[i])
    return out


def variant(
    record: tuple[str, str, str], number: int, sentences: Sequence[str], rng: np.random.Generator
) -> tuple[str, str, str]:
    """A recombined document: the source's sentences, each swapped for one of the corpus with SWAP_SHARE."""
    name, title, text = record
    own = [s for s in _SENTENCE_END.split(text) if s.strip()] or [text]
    mixed = [s if rng.random() >= SWAP_SHARE else sentences[int(rng.integers(len(sentences)))] for s in own]
    return f"v{number}-{name}", f"{' '.join(title.split())} (variant {number})", " ".join(mixed)


# --- synthesised vectors --------------------------------------------------------------------------


class SynthesisingEmbedder:
    """The Embedder protocol: records real vectors per chunk header while `recording`; afterwards a text
    whose header is a planned variant title gets its source's recorded vectors plus noise (module doc).
    Anything else, and every query, goes to the real embedder."""

    def __init__(self, inner):
        self.inner = inner
        self.model_name = inner.model_name
        self.dimension = inner.dimension
        self.recording = True
        self.recorded: dict[str, list[np.ndarray]] = defaultdict(list)  # header -> [(1 + units) x d] per chunk
        self.plan: dict[str, str] = {}  # variant title -> its source's header
        self.synthesised = 0

    def embed_documents_with_units(
        self, texts: Sequence[str], unit_spans: Sequence[Sequence[tuple[int, int]]], show_progress: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        if self.recording or not all(self._source(t) for t in texts):
            vectors, units = self.inner.embed_documents_with_units(texts, unit_spans, show_progress=show_progress)
            if self.recording:
                for text, vector, unit in zip(texts, vectors, units, strict=True):
                    header = text.split("\n", 1)[0]
                    if header:
                        self.recorded[header].append(np.vstack([vector[None, :], unit]).astype(np.float32))
            return vectors, units
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        units: list[np.ndarray] = []
        for i, (text, spans) in enumerate(zip(texts, unit_spans, strict=True)):
            rows = self._source(text)
            assert rows is not None
            seed = zlib.crc32(text.encode())
            rng = np.random.default_rng(seed)
            source = rows[seed % len(rows)]
            vectors[i] = _noisy(source[0], rng)
            bases = source[1:] if len(source) > 1 else source[:1]
            units.append(
                np.stack([_noisy(bases[k % len(bases)], rng) for k in range(len(spans))])
                if spans
                else np.empty((0, self.dimension), dtype=np.float32)
            )
        self.synthesised += len(texts)
        return vectors, units

    def _source(self, text: str) -> list[np.ndarray] | None:
        header = text.split("\n", 1)[0]
        source = self.plan.get(header) or self.plan.get(header.rsplit(" — ", 1)[0])
        return self.recorded.get(source) if source else None

    def embed_documents(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        spans = [[] for _ in texts]
        return self.embed_documents_with_units(texts, spans, show_progress=show_progress)[0]

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def tokenize(self, text: str) -> list:
        return self.inner.tokenize(text)

    def counters(self) -> tuple[int, int]:
        return self.inner.counters() if hasattr(self.inner, "counters") else (0, 0)


def _noisy(vector: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if not np.all(np.isfinite(vector)):
        return vector.astype(np.float32)  # a unit past the model's window stays NaN, as the real embedder makes it
    noise = rng.standard_normal(vector.shape[0]).astype(np.float32)
    noise *= NOISE_RATIO * float(np.linalg.norm(vector)) / max(float(np.linalg.norm(noise)), 1e-12)
    out = vector + noise
    return (out / max(float(np.linalg.norm(out)), 1e-12)).astype(np.float32)


# --- a Chroma server for server mode ----------------------------------------------------------------


class ChromaServer:
    """`chroma run` (shipped with chromadb) on 127.0.0.1 and a free port, over `path`."""

    def __init__(self, path: Path, log_path: Path):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.path, self.log_path = path, log_path
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> ChromaServer:
        script = Path(sys.executable).with_name("chroma")
        cli = str(script) if script.is_file() else shutil.which("chroma")
        if not cli:
            raise RuntimeError("server mode needs the `chroma` command (chromadb), which is not installed")
        self.path.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen(
                [cli, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self.process.returncode} (log: {self.log_path})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v2/heartbeat", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not answer within {timeout:.0f} s (log: {self.log_path})")
            time.sleep(0.2)

    def peak_rss_mb(self) -> float | None:
        return _peak_rss_of(self.process.pid) if self.process else None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
        self.process = None


def _peak_rss_of(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _own_peak_rss_mb() -> float:
    return _peak_rss_of(os.getpid()) or round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _disk_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return round(total / (1 << 20), 1)


# --- building -------------------------------------------------------------------------------------


def _settings(data_dir: Path, server: ChromaServer | None):
    (data_dir / "kb-declarations").mkdir(parents=True, exist_ok=True)
    return load_settings(
        data_dir=data_dir,
        knowledge_bases_dir=data_dir / "kb-declarations",  # no kb.toml: only the benchmark KB
        openai_api_key=None,  # the offline engine, whatever the environment says
        chroma_host="127.0.0.1" if server else None,
        chroma_port=server.port if server else 8000,
    )


def build(
    ws: EvalWorkspace,
    size: int,
    data_dir: Path,
    server: ChromaServer | None,
    datasets: Sequence[str],
    pool_documents: int,
    fresh: bool,
) -> dict:
    """The KB of about `size` chunks under `data_dir`: reused when its sidecar says it is complete, resumed
    (or extended from a smaller build of the same recipe) when the sidecar records progress.

    Resuming is sound because the documents are deterministic (the pool's order, the variants' rng, seeded)
    and each ingest publishes its documents in atomic groups: documents already live are "unchanged" to
    ingest and cost no work, so a restarted build continues where the last group left off. A sidecar of
    another recipe (datasets, pool, synthesis, pipeline version) starts over."""
    from bot.core import KnowledgeBot, Origin
    from bot.eval.embcache import CachingEmbedder

    corpora = source_records(datasets)
    limit = pool_documents or max(1, size // 10)
    pool = interleave(corpora, limit)
    # Not the size: a larger build of the same recipe begins with the smaller one's documents, in order.
    recipe = pipeline_fingerprint(SYNTHESIS_VERSION, str(len(pool)), ",".join(datasets))
    sidecar = data_dir / SIDECAR
    state = None if fresh else _read_state(sidecar, recipe)
    if state is not None and state["complete"] and state["size"] == size:
        return {**state, "reused": True}
    if state is not None and (state["chunks"] > size or not (data_dir / SOURCES_FILE).is_file()):
        state = None  # larger than asked (a smaller KB cannot be cut out of it), or the pool never finished
    if state is None:
        if data_dir.exists():
            shutil.rmtree(data_dir)
        data_dir.mkdir(parents=True)
    if server is not None:
        server.start()
    synth: list[SynthesisingEmbedder] = []

    def wrap(inner):
        # Cached vectors of the collection's identity stand in for this runtime's (float32 ONNX shares torch's):
        # the real documents' vectors need to be real MiniLM vectors, not this runtime's own.
        synth.append(SynthesisingEmbedder(CachingEmbedder(inner, ws.cache, also_read=inner.model_name)))
        return synth[0]

    started = time.perf_counter()
    progress = dict(state) if state else {"recipe": recipe, "build_s": 0.0, "ingest_calls_s": [], "sessions": 0}
    progress.update(size=size, complete=False, sessions=progress["sessions"] + 1)
    spent_before = float(progress["build_s"])
    bot = KnowledgeBot(_settings(data_dir, server), wrap_embedder=wrap)
    try:
        operator = Origin.cli()
        if state is None:
            bot.create_kb(operator, KB, DESCRIPTION)
            ws.log(f"[scale {size}] ingesting {len(pool)} real documents (cached vectors)…")
            report = bot.ingest_records(operator, KB, pool, progress=ws.progress)
            _check(report)
            embedder = _embedder_of(bot, synth)
            _save_sources(data_dir / SOURCES_FILE, embedder.recorded)
            progress.update(real_chunks=report.embedded_chunks, chunks=report.embedded_chunks, variants_done=0)
            hits, misses = embedder.counters()
            progress.update(synthesised_chunks=0, cache_hits=hits, cache_misses=misses)
            progress["ingest_calls_s"] = [round(time.perf_counter() - started, 1)]
            progress["build_s"] = progress["ingest_calls_s"][0]
            _write_state(sidecar, progress)  # a build stopped from here on resumes after the pool
        else:
            embedder = _embedder_of(bot, synth)
            embedder.recorded.update(_load_sources(data_dir / SOURCES_FILE))
            ws.log(
                f"[scale {size}] resuming: {progress['chunks']} chunks live, "
                f"{progress['variants_done']} recombined documents done"
            )
        embedder.recording = False
        hits_before, misses_before = embedder.counters()
        # Variants of the titled documents, until the estimated chunk count reaches the size.
        titled = [r for r in pool if r[1] and " ".join(r[1].split()) in embedder.recorded]
        if not titled and progress["chunks"] < size:
            raise DatasetError("no titled source document to make variants of (scifact, cranfield, cisi)")
        sentences = {
            corpus: [s for _, _, text in records for s in _SENTENCE_END.split(text) if s.strip()]
            for corpus, records in corpora.items()
        }
        corpus_of = {r[0]: corpus for corpus, records in corpora.items() for r in records}
        rng = np.random.default_rng(12)

        def variant_of(number: int) -> tuple[tuple[str, str, str], str]:
            record = titled[number % len(titled)]
            doc = variant(record, number // len(titled) + 1, sentences[corpus_of[record[0]]], rng)
            return doc, " ".join(record[1].split())

        number = int(progress["variants_done"])
        for done in range(number):  # the same rng draws as the build that made them
            variant_of(done)
        chunks, planned, batch = int(progress["chunks"]), 0, []
        while chunks + planned < size:
            doc, source = variant_of(number)
            embedder.plan[doc[1]] = source
            planned += len(embedder.recorded[source])
            batch.append(doc)
            number += 1
            if len(batch) >= _batch_documents(len(pool) + number - len(batch)) or chunks + planned >= size:
                ws.log(f"[scale {size}] ingesting {len(batch)} recombined documents ({chunks + planned} chunks)…")
                t = time.perf_counter()
                report = bot.ingest_records(operator, KB, batch, progress=ws.progress)
                _check(report)
                seconds = time.perf_counter() - t
                before, chunks = chunks, _live_chunks(bot, operator)
                hits, misses = embedder.counters()
                progress["ingest_calls_s"].append(round(seconds, 1))
                progress.update(
                    chunks=chunks,
                    variants_done=number,
                    documents=len(pool) + number,
                    synthesised_chunks=chunks - progress["real_chunks"],
                    cache_hits=progress["cache_hits"] + hits - hits_before,
                    cache_misses=progress["cache_misses"] + misses - misses_before,
                    build_s=round(spent_before + time.perf_counter() - started, 1),
                    build_peak_rss_mb=max(progress.get("build_peak_rss_mb", 0.0), _own_peak_rss_mb()),
                )
                hits_before, misses_before = hits, misses
                _write_state(sidecar, progress)
                ws.log(
                    f"[scale {size}] {chunks} chunks live ({(chunks - before) / max(seconds, 1e-9):.0f} chunks/s "
                    f"in this call, {round(progress['build_s'])} s of building so far)"
                )
                embedder.plan.clear()
                planned, batch = 0, []
        progress.update(
            chunks=chunks,
            documents=len(pool) + number,
            variants_done=number,
            complete=True,
            build_s=round(spent_before + time.perf_counter() - started, 1),
            build_peak_rss_mb=max(progress.get("build_peak_rss_mb", 0.0), _own_peak_rss_mb()),
        )
    finally:
        bot.close()
    _write_state(sidecar, progress)
    return {**progress, "reused": False}


SIDECAR = "scale-build.json"
RESULT_FILE = "scale-result.json"  # the last measurement of the KB
SOURCES_FILE = "scale-sources.npz"  # the real documents' recorded vectors, which a resumed build synthesises from


def _batch_documents(live_documents: int) -> int:
    """Documents per ingest call: at least BATCH_DOCUMENTS, and as many as are live already. Every call ends
    with a keyword-index update, which past 10 % of the index is a rebuild of the whole KB: calls that double
    the KB keep the rebuilds' total work near twice the final size instead of growing with its square."""
    return max(BATCH_DOCUMENTS, live_documents)


def _embedder_of(bot, synth: list[SynthesisingEmbedder]) -> SynthesisingEmbedder:
    if not synth:
        bot.embedder  # noqa: B018 - loads it, and with it the wrapper this build synthesises through
    return synth[0]


def _live_chunks(bot, operator) -> int:
    """The KB's live chunks, as the registry counts them (a resumed call's already-live documents included)."""
    return next(view.chunks for view in bot.visible_kbs(operator) if view.name == KB)


def _read_state(sidecar: Path, recipe: str) -> dict | None:
    try:
        state = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("recipe") == recipe else None


def _write_state(sidecar: Path, state: dict) -> None:
    partial = sidecar.with_name(sidecar.name + ".partial")
    partial.write_text(json.dumps(state), encoding="utf-8")
    os.replace(partial, sidecar)  # a build killed while writing leaves the previous state, never half of one


def _save_sources(path: Path, recorded: dict[str, list[np.ndarray]]) -> None:
    headers = list(recorded)
    rows = [matrix for header in headers for matrix in recorded[header]]
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as out:
        np.savez(
            out,
            headers=np.array(json.dumps(headers)),
            chunks_per_header=np.array([len(recorded[h]) for h in headers], dtype=np.int64),
            rows_per_chunk=np.array([len(m) for m in rows], dtype=np.int64),
            rows=np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32),
        )
    os.replace(partial, path)


def _load_sources(path: Path) -> dict[str, list[np.ndarray]]:
    with np.load(path, allow_pickle=False) as saved:
        headers = json.loads(str(saved["headers"]))
        rows = np.split(saved["rows"], np.cumsum(saved["rows_per_chunk"])[:-1]) if len(saved["rows_per_chunk"]) else []
        recorded: dict[str, list[np.ndarray]] = {}
        position = 0
        for header, count in zip(headers, saved["chunks_per_header"].tolist(), strict=True):
            recorded[header] = rows[position : position + count]
            position += count
    return recorded


def _check(report) -> None:
    if not report.ok:
        failed = [d for d in report.documents if d.status == "failed"]
        raise RuntimeError(f"ingest failed for {len(failed)} documents, e.g. {failed[0].error}")


# --- measuring (in a child process) ---------------------------------------------------------------


def measure(data_dir: Path, server: ChromaServer | None, queries: Sequence[str], publish: tuple[str, str, str]) -> dict:
    """Run the serving measurements in a fresh process and return what it reports."""
    request = {
        "data_dir": str(data_dir),
        "chroma_port": server.port if server else None,
        "queries": list(queries),
        "publish": list(publish),
    }
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("OPENAI_API_KEY", None)
    request_file = data_dir / "scale-request.json"
    request_file.write_text(json.dumps(request), encoding="utf-8")
    spawned = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "bot.eval.scale", str(request_file), repr(spawned)],
        env=env,
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the measuring process failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _serve(request_file: Path, spawned: float) -> dict:
    """The child: cold start to the first answer, warm search/ask, peak RSS, publishing one document."""
    marks = {"imports_s": 0.0}
    from bot.core import KnowledgeBot, Origin

    marks["imports_s"] = round(time.time() - spawned, 2)
    request = json.loads(request_file.read_text(encoding="utf-8"))
    data_dir = Path(request["data_dir"])
    port = request["chroma_port"]
    settings = load_settings(
        data_dir=data_dir,
        knowledge_bases_dir=data_dir / "kb-declarations",
        openai_api_key=None,
        chroma_host="127.0.0.1" if port else None,
        chroma_port=port or 8000,
    )
    queries = request["queries"]
    origin = Origin.eval([KB])
    bot = KnowledgeBot(settings)
    try:
        # The work of a first answer, step by step so the parts can be told apart (the sum is the cold start).
        for part, step in (
            ("store_open_s", bot.open_store),
            ("engine_s", lambda: bot.engine),
            ("model_s", lambda: bot.embedder.embed_query("warm-up")),
        ):
            t = time.perf_counter()
            step()
            marks[part] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        first = bot.ask(origin, queries[0]).answer
        marks["first_ask_s"] = round(time.perf_counter() - t, 2)  # keyword index and vector snapshot loading
        cold = time.time() - spawned
        after_cold_rss = _own_peak_rss_mb()

        bot.forget_query_vectors()
        search_ms = []
        for q in queries:
            t = time.perf_counter()
            bot.search(origin, KB, q, k=10)
            search_ms.append((time.perf_counter() - t) * 1000)
        bot.forget_query_vectors()  # each ask encodes its question again
        ask_ms, statuses = [], defaultdict(int)
        for q in queries:
            t = time.perf_counter()
            answer = bot.ask(origin, q).answer
            ask_ms.append((time.perf_counter() - t) * 1000)
            statuses[answer.status] += 1
        serving_rss = _own_peak_rss_mb()

        # A process's first publish also imports the chunker: timed apart, so publish_one_s is what each later one
        # costs and ingest_warm_up_s what the first upload after a start pays on top.
        t = time.perf_counter()
        bot.warm_up_ingest()
        ingest_warm_up_s = time.perf_counter() - t
        t = time.perf_counter()
        report = bot.ingest_records(Origin.cli(), KB, [tuple(request["publish"])])
        publish_s = time.perf_counter() - t
        t = time.perf_counter()
        bot.ask(origin, queries[1 % len(queries)])
        after_publish_ms = (time.perf_counter() - t) * 1000
        return {
            "cold_start_s": round(cold, 2),
            "cold_start_parts_s": marks,
            "first_answer_status": first.status,
            "queries": len(queries),
            "search_p50_ms": round(percentile(search_ms, 50), 1),
            "search_p95_ms": round(percentile(search_ms, 95), 1),
            "ask_p50_ms": round(percentile(ask_ms, 50), 1),
            "ask_p95_ms": round(percentile(ask_ms, 95), 1),
            "ask_statuses": dict(statuses),
            "peak_rss_mb": serving_rss,
            "rss_after_cold_start_mb": after_cold_rss,
            "ingest_warm_up_s": round(ingest_warm_up_s, 2),
            "publish_one_s": round(publish_s, 2),
            "publish_one_ok": report.ok and report.embedded_chunks > 0,
            "first_ask_after_publish_ms": round(after_publish_ms, 1),
            "peak_rss_with_publish_mb": _own_peak_rss_mb(),
        }
    finally:
        bot.close()


# --- the command ------------------------------------------------------------------------------------


def eval_scale(
    ws: EvalWorkspace,
    sizes: Sequence[int],
    stores: Sequence[str],
    datasets: Sequence[str] = DEFAULT_DATASETS,
    queries: int = 40,
    pool_documents: int = 0,
    fresh: bool = False,
    serve_embedded_build: bool = False,
) -> dict:
    """`serve_embedded_build`: server mode measures the embedded build of the same size, its Chroma directory
    served by `chroma run` (the server's own on-disk format), instead of building the KB again through a server
    — what changes with the mode is serving, and a 1M build through a server takes hours more here."""
    qs = queries_of([d for d in datasets if d in QUERY_DATASETS] or datasets, queries)
    if len(qs) < 2:
        raise DatasetError("eval scale needs at least two queries (a BEIR dataset's queries.jsonl)")
    rng = np.random.default_rng(7)
    corpora = source_records(datasets)
    sentences = [s for records in corpora.values() for _, _, t in records for s in _SENTENCE_END.split(t) if s.strip()]
    publish_text = " ".join(sentences[int(rng.integers(len(sentences)))] for _ in range(12))
    runs = []
    for store in stores:
        for size in sizes:
            over_embedded = store == "server" and serve_embedded_build
            data_dir = ws.dir / "scale" / f"{'embedded' if over_embedded else store}-{size}"
            server = None
            if store == "server":
                served = data_dir / ("chroma" if over_embedded else "chroma-server")
                server = ChromaServer(served, ws.dir / "scale" / f"chroma-{size}.log")
            try:
                built = build(ws, size, data_dir, None if over_embedded else server, datasets, pool_documents, fresh)
                if server is not None and server.process is None:
                    server.start()
                ws.log(f"[scale {size} {store}] measuring in a fresh process…")
                name = f"published-{int(time.time())}"
                measured = measure(data_dir, server, qs, (name, "A newly published document", publish_text))
                row = {"size": size, "store": store, **built, **measured, "disk_mb": _disk_mb(data_dir)}
                if server is not None:
                    row["server_peak_rss_mb"] = server.peak_rss_mb()
                    row["built_through"] = "embedded" if over_embedded else "server"
                # Beside the KB, so a long build's figures survive the terminal that started it.
                _write_state(data_dir / (f"server-{RESULT_FILE}" if over_embedded else RESULT_FILE), row)
            finally:
                if server is not None:
                    server.stop()
            row.pop("recipe", None)
            runs.append(row)
    return {"runs": runs, "goals": GOALS, "note": LOAD_NOTE}


GOALS = {
    "100000": {"ask_p95_ms": 150, "peak_rss_mb": 1536, "cold_start_s": 10},
    "1000000": {"ask_p95_ms": 500, "peak_rss_mb": 4096, "publish_one_s": 5},
}
LOAD_NOTE = "latencies depend on the machine's load; see docs/benchmarks.md (Scale) for the conditions"


def format_scale(result: dict) -> str:
    fields = (
        "search_p50_ms",
        "search_p95_ms",
        "ask_p50_ms",
        "ask_p95_ms",
        "peak_rss_mb",
        "disk_mb",
        "cold_start_s",
        "publish_one_s",
        "first_ask_after_publish_ms",
    )
    lines = ["| chunks | store | " + " | ".join(fields) + " |", "|---|---|" + "---|" * len(fields)]
    for r in result["runs"]:
        lines.append(f"| {r['chunks']} | {r['store']} | " + " | ".join(str(r.get(f)) for f in fields) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The measuring child: `python -m bot.eval.scale REQUEST.json SPAWNED_AT`; prints one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bot.eval.scale")
    parser.add_argument("request", type=Path)
    parser.add_argument("spawned", type=float)
    args = parser.parse_args(argv)
    print(json.dumps(_serve(args.request, args.spawned)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
