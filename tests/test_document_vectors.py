"""The search snapshot's per-document vectors: sums of their chunks' vectors, as `np.add.at` would make them."""

from __future__ import annotations

import numpy as np

from tools.search import _sum_rows_by_owner


def test_each_documents_sum_is_the_sum_of_its_own_chunks():
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((500, 16)).astype(np.float32)
    owner = rng.integers(0, 120, 500)  # unsorted, repeated, some documents own no chunk
    expected = np.zeros((130, 16), dtype=np.float32)
    np.add.at(expected, owner, vectors)

    sums = _sum_rows_by_owner(vectors, owner, 130)

    assert sums.dtype == np.float32 and sums.shape == (130, 16)
    np.testing.assert_allclose(sums, expected, rtol=1e-5, atol=1e-5)
    assert not sums[[i for i in range(130) if i not in set(owner.tolist())]].any(), "no chunk, a zero row"


def test_one_chunk_documents_keep_their_vector():
    vectors = np.eye(3, dtype=np.float32)
    assert _sum_rows_by_owner(vectors, np.array([2, 0, 1]), 3).tolist() == [[0, 1, 0], [0, 0, 1], [1, 0, 0]]
