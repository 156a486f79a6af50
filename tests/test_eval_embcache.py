"""The eval embedding cache: another vector source's entries stand in only where asked, and never receive
what this runtime computes."""

import numpy as np
from helpers.settings import build_settings

from bot.eval.embcache import CachingEmbedder, EmbeddingCache


def test_cached_vectors_of_the_collection_identity_stand_in_for_this_runtimes(tmp_path):
    from tools.embeddings import get_embedder

    inner = get_embedder(build_settings(tmp_path / "data"))
    assert inner.vector_source != inner.model_name  # float32 ONNX: its own source, torch's identity
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    stand_in = np.full(inner.dimension, 1 / np.sqrt(inner.dimension), dtype=np.float32)  # no model makes this
    cache.put_many([(EmbeddingCache.key(inner.model_name, "cached under torch's name"), stand_in)])

    reading = CachingEmbedder(inner, cache, also_read=inner.model_name)
    vectors = reading.embed_documents(["cached under torch's name", "in no cache at all"])
    assert np.array_equal(vectors[0], stand_in) and reading.counters() == (1, 1)
    computed = cache.get_many([EmbeddingCache.key(inner.vector_source, "in no cache at all")])
    assert len(computed) == 1  # stored under this runtime's source…
    assert not cache.get_many([EmbeddingCache.key(inner.model_name, "in no cache at all")])  # …never torch's

    plain = CachingEmbedder(inner, cache)  # not asked to: computes its own
    assert not np.allclose(plain.embed_documents(["cached under torch's name"])[0], stand_in)
