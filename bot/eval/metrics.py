"""Ranking and text metrics, computed the way BEIR/trec_eval do (linear gains for nDCG).

A *run* maps a query id to its ranked document ids (best first); *qrels* map a query id to
{document id: graded relevance}. Only relevance > 0 counts as relevant. Queries without any
relevant document are skipped (BEIR does the same); a query with no results scores 0.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

Run = Mapping[str, Sequence[str]]
Qrels = Mapping[str, Mapping[str, int]]


def dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    ideal = dcg(sorted((r for r in relevant.values() if r > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    gains = [max(relevant.get(doc, 0), 0) for doc in _dedup(ranked)[:k]]
    return dcg(gains) / ideal


def recall_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    positives = {d for d, r in relevant.items() if r > 0}
    if not positives:
        return 0.0
    return len(positives & set(_dedup(ranked)[:k])) / len(positives)


def mrr_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    for i, doc in enumerate(_dedup(ranked)[:k]):
        if relevant.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def hit_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    return 1.0 if mrr_at_k(ranked, relevant, k) > 0 else 0.0


METRICS = {
    "ndcg@10": lambda r, q: ndcg_at_k(r, q, 10),
    "recall@10": lambda r, q: recall_at_k(r, q, 10),
    "recall@100": lambda r, q: recall_at_k(r, q, 100),
    "mrr@10": lambda r, q: mrr_at_k(r, q, 10),
    "hit@5": lambda r, q: hit_at_k(r, q, 5),
}


def evaluate_run(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean of every metric in METRICS over the judged queries (those with a relevant document)."""
    judged = [q for q, rel in qrels.items() if any(r > 0 for r in rel.values())]
    if not judged:
        return {name: 0.0 for name in METRICS}
    return {name: sum(fn(run.get(q, ()), qrels[q]) for q in judged) / len(judged) for name, fn in METRICS.items()}


def per_query(run: Run, qrels: Qrels, metric: str = "ndcg@10") -> dict[str, float]:
    fn = METRICS[metric]
    return {q: fn(run.get(q, ()), rel) for q, rel in qrels.items() if any(r > 0 for r in rel.values())}


def percentile(values: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), p)) if len(values) else 0.0


def _dedup(ranked: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


# --- text overlap (SQuAD-style normalisation) ---------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, reference: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def contains_answer(text: str, answers: Sequence[str]) -> bool:
    norm = normalize_answer(text)
    return any(a and normalize_answer(a) in norm for a in answers)
