"""The local MiniLM on ONNX Runtime: torch's vectors, the export verified, no torch on its path.

The ONNX exports live in the shared test model cache (helpers.settings.TEST_MODEL_CACHE): the first
test that needs one exports it (tens of seconds), every later one, in this or another process, loads
the verified file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import child_env
from helpers.settings import TEST_MODEL_CACHE

from bot.config import Settings, describe_settings_error, load_settings
from tools.embeddings import LOCAL_IDENTITIES, EmbeddingError, LocalMiniLM, embedding_identity
from tools.onnx_export import (
    EXPORT_DIR_NAME,
    FILE_NAMES,
    FUSION_MIN_TOKEN_COSINE,
    OUTPUT_NAME,
    RECIPES,
    manifest_path,
    read_verified,
    verified_onnx_model,
)
from tools.onnx_minilm import INT8_ENCODING, OnnxMiniLM, _cpu_count
from tools.openvino_minilm import OpenVinoMiniLM
from tools.store import EmbeddingModelMismatch

TEXTS = [
    "Mitochondrial DNA mutations accumulate with age in human muscle.",
    "  The VPN client needs a restart after the certificate rotates.  ",
    "Ünïcödé, CAPITALS and punctuation!? — all lower-cased by the tokenizer.",
    "x",
    "Aspirin lowers the risk of a second heart attack. " * 40,  # past the 256-token window
]
# float32 ONNX runs torch's arithmetic in another order: cosines to torch measured ≥ 0.99999
# (docs/benchmarks.md, "Local runtimes"); int8 weights move vectors further.
FLOAT32_MIN_COSINE = 0.9999
INT8_MIN_COSINE = 0.95
# OpenVINO's bfloat16 arithmetic moves vectors by ~1e-5 in cosine (docs/benchmarks.md): interchangeable.
OPENVINO_MIN_COSINE = 0.9999


@pytest.fixture(scope="session")
def torch_minilm() -> LocalMiniLM:
    return LocalMiniLM()


@pytest.fixture(scope="session")
def onnx_minilm() -> OnnxMiniLM:
    return OnnxMiniLM(TEST_MODEL_CACHE, "onnx")


@pytest.fixture(scope="session")
def int8_minilm() -> OnnxMiniLM:
    return OnnxMiniLM(TEST_MODEL_CACHE, "onnx-int8")


@pytest.fixture(scope="session")
def openvino_minilm() -> OpenVinoMiniLM:
    return OpenVinoMiniLM(TEST_MODEL_CACHE)


# Bulk encodes run on OpenVINO only with a thread to spare for each side (one core: ONNX Runtime does them all).
needs_two_cores = pytest.mark.skipif(_cpu_count() < 2, reason="OpenVINO runs bulk encodes only on 2+ cores")


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


def test_onnx_vectors_are_torch_vectors(torch_minilm: LocalMiniLM, onnx_minilm: OnnxMiniLM) -> None:
    reference = torch_minilm.embed_documents(TEXTS)
    vectors = onnx_minilm.embed_documents(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert _cosines(vectors, reference).min() >= FLOAT32_MIN_COSINE
    # the query path (one text, one thread) gives the same vector as the batch path
    assert float(onnx_minilm.embed_query(TEXTS[0]) @ vectors[0]) >= 0.99999
    assert float(onnx_minilm.embed_query(TEXTS[0]) @ torch_minilm.embed_query(TEXTS[0])) >= FLOAT32_MIN_COSINE


@needs_two_cores
def test_openvino_vectors_are_torch_vectors(torch_minilm: LocalMiniLM, openvino_minilm: OpenVinoMiniLM) -> None:
    """A bulk encode on OpenVINO (bfloat16 where the CPU has it): document and span vectors interchangeable with
    torch's, so KBs of either serve the other (one identity), and caches tell them apart."""
    text = "VPN setup\nInstall the client. Then import the profile."
    texts = [*TEXTS, text] * 11  # enough batches to run side by side on OpenVINO
    spans = [[(0, 3)]] * len(TEXTS) + [[(10, 29), (30, len(text)), (len(text), len(text) + 3)]]
    vectors, units = openvino_minilm.embed_documents_with_units(texts, spans * 11)
    assert openvino_minilm._bulk is not None  # OpenVINO computed them, not ONNX Runtime
    reference, expected_units = torch_minilm.embed_documents_with_units(texts[: len(spans)], spans)
    assert vectors.shape == (len(texts), 384) and vectors.dtype == np.float32
    assert _cosines(vectors, np.tile(reference, (11, 1))).min() >= OPENVINO_MIN_COSINE
    assert _cosines(units[-1][:2], expected_units[-1][:2]).min() >= OPENVINO_MIN_COSINE
    assert np.isnan(units[-1][2]).all()  # a span with no token, as every runtime pools it
    assert LOCAL_IDENTITIES["openvino"] == LOCAL_IDENTITIES["onnx"] == LOCAL_IDENTITIES["torch"]
    assert openvino_minilm.vector_source == f"{LocalMiniLM.model_name}@openvino-{openvino_minilm.precision}"
    assert openvino_minilm.precision in ("bf16", "f32")


def test_openvino_runs_only_bulk_encodes(onnx_minilm: OnnxMiniLM, openvino_minilm: OpenVinoMiniLM) -> None:
    """A short encode (a query, a document of a batch or two) is float32 ONNX Runtime's, the same bits as `onnx`:
    reading the graph into OpenVINO costs memory a one-document publish must not pay."""
    assert np.array_equal(openvino_minilm.embed_documents(TEXTS), onnx_minilm.embed_documents(TEXTS))


def test_openvino_that_cannot_load_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # as on a machine where its libraries do not load
    with pytest.raises(EmbeddingError, match="KBBOT_LOCAL_RUNTIME=onnx"):
        OpenVinoMiniLM(TEST_MODEL_CACHE)


@needs_two_cores
def test_openvino_bulk_encodes_from_two_threads_at_once(
    onnx_minilm: OnnxMiniLM, openvino_minilm: OpenVinoMiniLM
) -> None:
    """Two ingests at once (a sync and an upload): both finish, every row is still its own text's vector, and no two
    threads are ever inside OpenVINO's inference at once (two were seen to deadlock in its input dispatch)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"note {i}: the {'rota' if i % 3 else 'budget'} changes " + "every week " * (i % 23) for i in range(90)]
    expected = onnx_minilm.embed_documents(texts)
    openvino_minilm.embed_documents(texts)
    bulk = openvino_minilm._bulk
    assert bulk is not None
    inside, most, guard, request = [0], [0], threading.Lock(), bulk._request

    class Counted:
        def infer(self, feeds):
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            try:
                return request.infer(feeds)
            finally:
                with guard:
                    inside[0] -= 1

    bulk._request = Counted()
    try:
        with ThreadPoolExecutor(2) as pool:
            runs = [pool.submit(openvino_minilm.embed_documents, texts[::step]) for step in (1, 1, 2, 1)]
            results = [run.result(timeout=120) for run in runs]
    finally:
        bulk._request = request
    assert most[0] == 1
    for step, vectors in zip((1, 1, 2, 1), results, strict=True):
        assert _cosines(vectors, expected[::step]).min() >= OPENVINO_MIN_COSINE


@needs_two_cores
def test_queries_do_not_wait_for_the_first_bulk_compile(onnx_minilm: OnnxMiniLM) -> None:
    """A serving process's first big ingest compiles the model for OpenVINO (a second or more); questions asked
    meanwhile are encoded at once, not queued behind it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    embedder = OpenVinoMiniLM(TEST_MODEL_CACHE)
    compiling, query_done, query_came_first = threading.Event(), threading.Event(), []
    real_core = embedder._core

    class SlowCore:
        def __getattr__(self, name):
            return getattr(real_core, name)

        def compile_model(self, *args, **kwargs):
            compiling.set()
            query_came_first.append(query_done.wait(timeout=10))  # while this compile is still running
            return real_core.compile_model(*args, **kwargs)

    embedder._core = SlowCore()
    with ThreadPoolExecutor(1) as pool:
        ingest = pool.submit(embedder.embed_documents, TEXTS * 13)
        assert compiling.wait(timeout=30)
        vector = embedder.encode_queries([TEXTS[0]])[0]
        query_done.set()
        vectors = ingest.result(timeout=120)
    assert query_came_first == [True]
    assert np.array_equal(vector, onnx_minilm.encode_queries([TEXTS[0]])[0])
    assert embedder._bulk is not None and _cosines(vectors[:1], vector[None]).min() >= OPENVINO_MIN_COSINE


@needs_two_cores
def test_openvino_that_cannot_compile_encodes_on_onnx_runtime(
    onnx_minilm: OnnxMiniLM, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenVINO's ONNX frontend loads only at the first bulk encode: where it cannot, the ingest goes on with ONNX
    Runtime's float32 vectors (the same identity), says so once, and does not try again for every document."""
    embedder = OpenVinoMiniLM(TEST_MODEL_CACHE)
    attempts = []

    class BrokenCore:
        def compile_model(self, model, *settings):
            return model

        def read_model(self, model):
            attempts.append(model)
            raise RuntimeError("libopenvino_onnx_frontend.so: cannot open shared object file")

    embedder._core = BrokenCore()
    with caplog.at_level("WARNING", logger="tools.openvino_minilm"):
        first = embedder.embed_documents(TEXTS * 13)
        second = embedder.embed_documents(TEXTS * 13)
    assert np.array_equal(first, onnx_minilm.embed_documents(TEXTS * 13)) and np.array_equal(first, second)
    assert len(attempts) == 1 and embedder._bulk is None
    assert "KBBOT_LOCAL_RUNTIME=onnx" in caplog.text and "cannot open shared object" in caplog.text


def test_openvino_queries_are_the_same_bits_whoever_else_asks(
    onnx_minilm: OnnxMiniLM, openvino_minilm: OpenVinoMiniLM
) -> None:
    """Concurrent questions' queries are encoded as one batch: a question's vector, and so its answer, must not
    depend on what else is being asked. Queries are float32 ONNX Runtime's, alone or in any batch."""
    alone = np.stack([openvino_minilm.encode_queries([text])[0] for text in TEXTS])
    assert np.array_equal(alone, openvino_minilm.encode_queries([*reversed(TEXTS)])[::-1])
    assert np.array_equal(alone, onnx_minilm.encode_queries(TEXTS))


def test_int8_vectors_are_near_torch_but_not_the_same(torch_minilm: LocalMiniLM, int8_minilm: OnnxMiniLM) -> None:
    cosines = _cosines(int8_minilm.embed_documents(TEXTS), torch_minilm.embed_documents(TEXTS))
    assert cosines.min() >= INT8_MIN_COSINE
    assert cosines.min() < 0.9999  # were they equal, int8 would not need its own identity


def test_an_int8_vector_is_the_same_bits_alone_and_in_any_batch(int8_minilm: OnnxMiniLM) -> None:
    """int8 scales activations per tensor: batched, a text's vector would move with its batch mates and their
    padding. Run one text per pass, it is its own text's, whatever shares the call or the thread count."""
    mates = [f"filler sentence {i} about rotas, budgets and VPN profiles " * (1 + i % 9) for i in range(70)]
    alone = np.stack([int8_minilm.encode_queries([text])[0] for text in TEXTS])
    in_a_batch = int8_minilm.embed_documents([*mates[:40], *TEXTS, *mates[40:]])[40 : 40 + len(TEXTS)]
    as_concurrent_queries = int8_minilm.encode_queries([*reversed(TEXTS), *mates[:20]])[: len(TEXTS)][::-1]
    assert np.array_equal(alone, in_a_batch)  # passes side by side vs one at a time, 75 batch mates vs none
    assert np.array_equal(alone, as_concurrent_queries)
    spans = [[(0, 12)]] * len(TEXTS)
    with_units, _ = int8_minilm.embed_documents_with_units([*TEXTS, *mates[:5]], [*spans, *[[(0, 5)]] * 5])
    assert np.array_equal(alone, with_units[: len(TEXTS)])


def test_int8_kbs_of_the_batched_encoding_are_refused(make_settings) -> None:
    """A KB indexed by the earlier int8, whose texts were run in batches of 64, holds vectors that moved with
    their batch mates: it is refused under today's int8, not silently mixed."""
    from tools.service import KnowledgeService

    int8 = make_settings(KBBOT_LOCAL_RUNTIME="onnx-int8")
    batched_identity = (f"{LocalMiniLM.model_name}+int8", LocalMiniLM.dimension)
    assert embedding_identity(int8.tools) != batched_identity
    with KnowledgeService(int8.tools) as service:
        service.store.ensure_kb("handbook", "the handbook", *batched_identity)
        with pytest.raises(EmbeddingModelMismatch, match="reindex"):
            service.store.check_model("handbook", *embedding_identity(int8.tools))


def test_tokens_counted_as_torch_counts_them(torch_minilm: LocalMiniLM, onnx_minilm: OnnxMiniLM) -> None:
    for text in TEXTS:
        assert onnx_minilm.tokenize(text) == torch_minilm.tokenize(text)
    assert len(onnx_minilm.tokenize(TEXTS[-1])) > 256  # counting is not truncated


def test_span_vectors_pooled_from_the_same_pass(torch_minilm: LocalMiniLM, onnx_minilm: OnnxMiniLM) -> None:
    text = "  VPN — setup\nInstall the client. Then import the profile.\n\nRestart it after rotation."
    first = text.index("Install")
    second = text.index("Then")
    third = text.index("Restart")
    spans = [[(first, second - 1), (second, third - 2), (third, len(text)), (len(text), len(text) + 5)]]
    expected_vectors, expected_units = torch_minilm.embed_documents_with_units([text], spans)
    vectors, units = onnx_minilm.embed_documents_with_units([text], spans)
    assert _cosines(vectors, expected_vectors).min() >= FLOAT32_MIN_COSINE
    assert units[0].shape == (4, 384)
    assert np.isnan(units[0][3]).all() and np.isnan(expected_units[0][3]).all()  # a span with no token
    assert _cosines(units[0][:3], expected_units[0][:3]).min() >= FLOAT32_MIN_COSINE
    # a sentence's vector is its own, not the whole text's
    assert float(units[0][0] @ units[0][2]) < 0.95
    long_vectors, long_units = onnx_minilm.embed_documents_with_units([TEXTS[-1]], [[(0, 40), (10_000, 10_040)]])
    assert not np.isnan(long_units[0][0]).any() and np.isnan(long_units[0][1]).all()  # past the window: NaN
    assert long_vectors.shape == (1, 384)


def test_many_texts_keep_their_order(onnx_minilm: OnnxMiniLM) -> None:
    """Batches are cut from texts sorted by length: each row still belongs to its own text."""
    texts = [f"document number {i} " * (1 + i % 7) for i in range(150)]
    batch = onnx_minilm.embed_documents(texts)
    for i in (0, 63, 64, 149):
        assert float(batch[i] @ onnx_minilm._encode_one(texts[i])) >= 0.99999


def _copy_export(tmp_path: Path) -> Path:
    cache = tmp_path / "models"
    shutil.copytree(TEST_MODEL_CACHE / EXPORT_DIR_NAME, cache / EXPORT_DIR_NAME)
    return cache


def test_a_corrupt_export_is_exported_again(int8_minilm: OnnxMiniLM, tmp_path: Path) -> None:
    cache = _copy_export(tmp_path)
    int8 = cache / EXPORT_DIR_NAME / FILE_NAMES["onnx-int8"]
    good = int8.read_bytes()
    corrupt = bytearray(good)
    corrupt[len(corrupt) // 2] ^= 0xFF
    int8.write_bytes(bytes(corrupt))
    assert read_verified(int8, int8_minilm_source(), "onnx-int8") is None
    embedder = OnnxMiniLM(cache, "onnx-int8")  # quantised again from the verified float32 file
    assert read_verified(int8, int8_minilm_source(), "onnx-int8") is not None
    assert float(embedder.embed_query(TEXTS[0]) @ int8_minilm.embed_query(TEXTS[0])) >= 0.9999


def test_the_float32_export_is_the_fused_graph_and_gives_token_embeddings(onnx_minilm: OnnxMiniLM) -> None:
    import onnx

    float32 = TEST_MODEL_CACHE / EXPORT_DIR_NAME / FILE_NAMES["onnx"]
    manifest = json.loads(manifest_path(float32).read_text())
    assert manifest["recipe"] == RECIPES["onnx"]
    assert manifest["checks"]["min_token_cosine_to_torch"] >= FUSION_MIN_TOKEN_COSINE
    graph = onnx.load_from_string(read_verified(float32, int8_minilm_source(), "onnx")).graph
    operators = [node.op_type for node in graph.node]
    # one fused Attention per layer, the LayerNorms fused with their residual adds
    assert operators.count("Attention") == 6 and operators.count("SkipLayerNormalization") == 12
    assert "Softmax" not in operators
    assert [o.name for o in graph.output] == [OUTPUT_NAME]
    int8 = onnx.load(str(TEST_MODEL_CACHE / EXPORT_DIR_NAME / FILE_NAMES["onnx-int8"])).graph
    int8_operators = [node.op_type for node in int8.node]
    assert "Attention" in int8_operators and "MatMulInteger" in int8_operators  # int8 is the fused graph quantised


def test_the_fusion_check_refuses_a_graph_that_is_not_torchs(int8_minilm: OnnxMiniLM) -> None:
    """The export's own check: the float32 graph passes, a graph computing something else (int8) is refused."""
    from tools.embeddings import verified_model_dir
    from tools.onnx_export import _check_token_embeddings, _load_encoder

    encoder = _load_encoder(verified_model_dir())
    export_dir = TEST_MODEL_CACHE / EXPORT_DIR_NAME
    assert _check_token_embeddings(encoder, export_dir / FILE_NAMES["onnx"]) >= FUSION_MIN_TOKEN_COSINE
    with pytest.raises(RuntimeError, match="differ from torch's"):
        _check_token_embeddings(encoder, export_dir / FILE_NAMES["onnx-int8"])


def test_an_export_of_an_older_recipe_is_exported_again(int8_minilm: OnnxMiniLM, tmp_path: Path) -> None:
    cache = _copy_export(tmp_path)
    export_dir = cache / EXPORT_DIR_NAME
    for runtime, old_recipe in (("onnx", "torchscript-opset17-last-hidden-state"), ("onnx-int8", "dynamic-qint8")):
        manifest = json.loads(manifest_path(export_dir / FILE_NAMES[runtime]).read_text())
        manifest["recipe"] = old_recipe  # the bytes still hash as recorded: only the recipe is stale
        manifest_path(export_dir / FILE_NAMES[runtime]).write_text(json.dumps(manifest))
        assert read_verified(export_dir / FILE_NAMES[runtime], int8_minilm_source(), runtime) is None
    # put the float32 manifest back, so only int8 is made again (quantising is quick, tracing is not)
    shutil.copy(
        manifest_path(TEST_MODEL_CACHE / EXPORT_DIR_NAME / FILE_NAMES["onnx"]),
        manifest_path(export_dir / FILE_NAMES["onnx"]),
    )
    embedder = OnnxMiniLM(cache, "onnx-int8")
    assert json.loads(manifest_path(export_dir / FILE_NAMES["onnx-int8"]).read_text())["recipe"] == RECIPES["onnx-int8"]
    assert float(embedder.embed_query(TEXTS[0]) @ int8_minilm.embed_query(TEXTS[0])) >= 0.9999


def test_int8_vectors_are_cached_under_their_recipe(onnx_minilm: OnnxMiniLM, int8_minilm: OnnxMiniLM) -> None:
    """An eval embedding cache must not replay another int8 recipe's vectors; float32's are torch's either way."""
    assert RECIPES["onnx-int8"] in int8_minilm.vector_source
    assert INT8_ENCODING in int8_minilm.vector_source  # not the vectors of the batched int8, which were cached
    assert onnx_minilm.vector_source != int8_minilm.vector_source != LocalMiniLM.vector_source


def test_an_export_of_other_weights_is_not_loaded(tmp_path: Path) -> None:
    cache = _copy_export(tmp_path)
    int8 = cache / EXPORT_DIR_NAME / FILE_NAMES["onnx-int8"]
    manifest = json.loads(manifest_path(int8).read_text())
    manifest["source_sha256"] = "0" * 64
    manifest_path(int8).write_text(json.dumps(manifest))
    assert read_verified(int8, int8_minilm_source(), "onnx-int8") is None
    OnnxMiniLM(cache, "onnx-int8")
    assert json.loads(manifest_path(int8).read_text())["source_sha256"] == int8_minilm_source()


def test_unverified_weights_are_refused_and_nothing_is_exported(tmp_path: Path) -> None:
    from tools.embeddings import verified_model_dir

    fake = tmp_path / "fake-model"
    shutil.copytree(verified_model_dir(), fake)
    (fake / "model.safetensors").write_bytes(b"not the pinned weights")
    with pytest.raises(EmbeddingError, match="fail verification"):
        OnnxMiniLM(tmp_path / "models", "onnx", model_dir=fake)
    # and the exporter refuses weights that do not hash as the caller claims
    with pytest.raises(RuntimeError, match="exporting the embedding model to ONNX failed"):
        verified_onnx_model(tmp_path / "models", fake, int8_minilm_source(), "onnx")
    assert not list((tmp_path / "models").rglob("*.onnx"))


def test_an_unwritable_model_cache_is_a_clear_error(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache folder should be")
    with pytest.raises(EmbeddingError) as caught:
        OnnxMiniLM(blocked, "onnx")
    message = str(caught.value)
    assert "KBBOT_MODEL_CACHE_DIR" in message and "KBBOT_LOCAL_RUNTIME=torch" in message
    assert "Errno" not in message  # the OS error is logged, not shown


def int8_minilm_source() -> str:
    from tools.embeddings import MINILM_SHA256

    return MINILM_SHA256


@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
def test_the_onnx_paths_never_import_torch_or_telemetry(settings: Settings, tmp_path: Path, runtime: str) -> None:
    """A real process: ingest-style and query encodes through get_embedder; torch must stay out of it, and so
    must OpenVINO's and ONNX Runtime's telemetry (each would write an id under the home and send usage events)."""
    script = textwrap.dedent(
        """
        import json, sys
        from bot.config import load_settings
        from tools.embeddings import embed_chunks, get_embedder

        embedder = get_embedder(load_settings().tools)
        embedder.embed_documents(["one text", "another, longer text"])
        embedder.embed_documents_with_units(["First. Second."], [[(0, 6), (7, 14)]])
        embedder.embed_query("a question")
        embedder.tokenize("count me")
        heavy = ("torch", "transformers", "sentence_transformers", "openvino_telemetry")
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
        print(json.dumps({"runtime": embedder.runtime, "heavy": heavy}))
        """
    )
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=child_env(settings, KBBOT_LOCAL_RUNTIME=runtime, HOME=str(home)),
        cwd=str(settings.data_dir.parent),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"runtime": runtime, "heavy": []}
    assert not (home / "intel").exists()
    # ONNX Runtime's own usage telemetry (a device id and an event queue, then an upload) stays off too.
    assert not (home / ".cache" / "Microsoft").exists()


def test_runtime_setting_parsed_and_bad_values_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.model_fields["local_runtime"].default in LOCAL_IDENTITIES
    monkeypatch.setenv("KBBOT_LOCAL_RUNTIME", "onnx-int8")
    assert load_settings().tools.local_runtime == "onnx-int8"
    monkeypatch.setenv("KBBOT_LOCAL_RUNTIME", "tensorflow")
    with pytest.raises(Exception) as caught:
        load_settings()
    message = describe_settings_error(caught.value)  # type: ignore[arg-type]
    assert "KBBOT_LOCAL_RUNTIME" in message and "'onnx-int8'" in message


def test_bad_runtime_setting_is_a_clear_cli_error(settings: Settings) -> None:
    from helpers.cli import run_kbbot

    done = run_kbbot(settings, "kb", "list", KBBOT_LOCAL_RUNTIME="gpu")
    assert done.returncode != 0
    assert "error: invalid setting KBBOT_LOCAL_RUNTIME" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_kb_indexed_with_int8_is_refused_under_torch(make_settings) -> None:
    from tools.service import KnowledgeService

    int8 = make_settings(KBBOT_LOCAL_RUNTIME="onnx-int8")
    with KnowledgeService(int8.tools) as service:
        service.store.ensure_kb("handbook", "the handbook", *embedding_identity(int8.tools))
    for runtime in ("torch", "onnx"):
        other = make_settings(KBBOT_LOCAL_RUNTIME=runtime)
        assert embedding_identity(other.tools) != embedding_identity(int8.tools)
        with KnowledgeService(other.tools) as service, pytest.raises(EmbeddingModelMismatch, match="reindex"):
            service.store.check_model("handbook", *embedding_identity(other.tools))
    torch_identity = embedding_identity(make_settings(KBBOT_LOCAL_RUNTIME="torch").tools)
    assert torch_identity == embedding_identity(make_settings(KBBOT_LOCAL_RUNTIME="onnx").tools)
