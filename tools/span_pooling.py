"""Span vectors from token embeddings: the model's mean pooling over a character span instead of the whole text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pool_spans(offsets: np.ndarray, spans: Sequence[tuple[int, int]], token_embeddings: np.ndarray) -> np.ndarray:
    """One normalised vector per (start, end) span: the mean of the tokens that lie inside it.

    `offsets` are the (start, end) characters of each token, in the same text coordinates as the
    spans; special tokens ([CLS], [SEP]) and padding have empty offsets and count for no span.
    A span with no token inside (past the model's window, or blank) gets a row of NaN.
    """
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    bounds = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    real = offsets[:, 1] > offsets[:, 0]
    inside = (
        real[None, :] & (offsets[None, :, 0] >= bounds[:, None, 0]) & (offsets[None, :, 1] <= bounds[:, None, 1])
    ).astype(np.float32)
    sums = inside @ np.asarray(token_embeddings[: len(offsets)], dtype=np.float32)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        # mean-pooled then normalised = the normalised sum
        return np.where(norms > 0, sums / norms, np.nan).astype(np.float32)
