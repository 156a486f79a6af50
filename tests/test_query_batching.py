"""Query encodes of concurrent questions go out as shared batches (tools/query_batching.py): the vectors are
the ones a lone encode gives, and a failed batch raises in every caller waiting on it instead of hanging."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from helpers.fake_embeddings import FakeEmbeddings
from helpers.settings import build_settings
from openai import BadRequestError

from tools.embeddings import LocalMiniLM, OpenAIEmbedder, get_embedder
from tools.query_batching import BatchingEmbedder

ROOT = Path(__file__).resolve().parent.parent
# A guard against a hang, not a timing assertion: a healthy batch finishes in well under a second.
NO_HANG_S = 120


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> LocalMiniLM:
    """The process's own model (loaded once), unwrapped."""
    embedder = get_embedder(build_settings(tmp_path_factory.mktemp("model") / "data").tools)
    assert isinstance(embedder, BatchingEmbedder)
    return embedder.inner


def sample_questions(n: int) -> list[str]:
    lines = (ROOT / "tests/fixtures/sample_questions.jsonl").read_text().splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()][:n]


def all_at_once(call, texts: list[str]) -> list:
    """`call(text)` for every text from its own thread, released together."""
    barrier = threading.Barrier(len(texts))

    def one(text: str):
        barrier.wait()
        return call(text)

    with ThreadPoolExecutor(len(texts)) as pool:
        futures = [pool.submit(one, t) for t in texts]
        return [f.result(timeout=NO_HANG_S) for f in futures]


def test_concurrent_queries_get_the_vectors_a_lone_encode_gives(minilm: LocalMiniLM) -> None:
    texts = sample_questions(20)
    texts += [texts[0], "401k", "What is SEV1?"]  # a repeat, and short texts padded beside long ones
    alone = np.stack([minilm.encode_queries([t])[0] for t in texts])
    batching = BatchingEmbedder(minilm, window_s=0.05)

    together = np.stack(all_at_once(batching.embed_query, texts))

    assert together.shape == (len(texts), minilm.dimension)
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert np.array_equal(together[0], together[20])  # the repeated text: one encode, one vector
    # fewer forward passes than texts: the concurrent queries shared batches
    assert batching.batcher.batches < len(texts)
    assert batching.batcher.texts == len(set(texts))


def test_cached_and_batched_queries_agree(minilm: LocalMiniLM) -> None:
    batching = BatchingEmbedder(minilm)
    texts = sample_questions(5)
    first = batching.embed_queries(texts)
    encoded = batching.batcher.texts
    again = np.stack([batching.embed_query(t) for t in reversed(texts)])[::-1]

    assert np.array_equal(first, again)
    assert batching.batcher.texts == encoded  # the second time every vector came from the cache
    np.testing.assert_allclose(first, np.stack([minilm.encode_queries([t])[0] for t in texts]), atol=1e-5)


def test_the_process_embedder_batches_queries_and_keeps_the_rest(tmp_path: Path) -> None:
    embedder = get_embedder(build_settings(tmp_path / "data").tools)
    assert isinstance(embedder, BatchingEmbedder)
    assert embedder.model_name == LocalMiniLM.model_name and embedder.dimension == 384
    vectors, units = embedder.embed_documents_with_units(["One sentence. Another one."], [[(0, 13), (14, 26)]])
    assert vectors.shape == (1, 384) and units[0].shape == (2, 384)
    np.testing.assert_allclose(embedder.embed_query("vacation days"), embedder.inner.embed_query("vacation days"))


@pytest.fixture
def endpoint():
    fake = FakeEmbeddings().start()
    yield fake
    fake.stop()


def test_a_failed_batch_raises_in_every_caller_waiting_on_it(endpoint: FakeEmbeddings, tmp_path: Path) -> None:
    settings = build_settings(tmp_path / "data", **endpoint.settings()).tools
    batching = BatchingEmbedder(OpenAIEmbedder(settings))
    endpoint.reject("poisoned")
    held = tmp_path / "held"
    endpoint.hold_on("first question", held)

    first = batching.batcher.submit("first question")  # the encoder thread is now stuck in this request
    while not held.exists():
        threading.Event().wait(0.01)
    waiting = ["how many vacation days", "poisoned question", "expense limits", "on-call rota"]
    with ThreadPoolExecutor(len(waiting)) as pool:
        callers = [pool.submit(batching.embed_query, t) for t in waiting]
        while sum(len(f) for f in batching.batcher._waiting.values()) < len(waiting):
            threading.Event().wait(0.01)  # all four are queued behind the held request: one batch
        endpoint.release()

        assert first.result(timeout=NO_HANG_S).shape == (64,)
        for caller in callers:
            with pytest.raises(BadRequestError):
                caller.result(timeout=NO_HANG_S)

    assert endpoint.rejected == 1  # one request, the whole batch
    # the encoder lives on, and nothing of the failed batch was cached
    assert batching.embed_query("how many vacation days").shape == (64,)
    assert batching.cache.get("poisoned question") is None
    with pytest.raises(BadRequestError):
        batching.embed_query("poisoned question")


class ExtraRowModel:
    """A model that answers a batch with one row too many."""

    model_name = "extra-row"
    dimension = 4

    def embed_documents(self, texts, show_progress: bool = False) -> np.ndarray:
        return np.ones((len(texts) + 1, self.dimension))


def test_a_wrong_sized_result_is_an_error_for_every_caller() -> None:
    """An encoder returning the wrong number of rows must not hand anyone another text's vector."""
    batching = BatchingEmbedder(ExtraRowModel())
    with pytest.raises(RuntimeError, match="returned"):
        batching.embed_query("anything")
