"""Metric code against small cases computed by hand."""

import math

import pytest

from bot.eval.metrics import (
    contains_answer,
    evaluate_run,
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    recall_at_k,
    token_f1,
)


def test_ndcg_binary_by_hand():
    # relevant: a, c. ranked: a, b, c → DCG = 1 + 1/log2(4) = 1.5 ; IDCG = 1 + 1/log2(3)
    value = ndcg_at_k(["a", "b", "c"], {"a": 1, "c": 1}, 10)
    assert value == pytest.approx(1.5 / (1 + 1 / math.log2(3)))


def test_ndcg_graded_uses_linear_gains_and_ideal_order():
    # gains ranked: b(1), a(3) → 1 + 3/log2(3); ideal: 3 + 1/log2(3)
    value = ndcg_at_k(["b", "a"], {"a": 3, "b": 1}, 10)
    assert value == pytest.approx((1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3)))


def test_ndcg_cutoff_and_perfect():
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}, 2) == 0.0
    assert ndcg_at_k(["a", "b"], {"a": 2, "b": 1}, 10) == pytest.approx(1.0)
    # ideal DCG is cut at k too: 3 relevant docs, k=2, the two best retrieved → 1.0
    assert ndcg_at_k(["a", "b", "c"], {"a": 1, "b": 1, "c": 1}, 2) == pytest.approx(1.0)


def test_duplicates_count_once():
    assert ndcg_at_k(["a", "a", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(1.0)
    assert recall_at_k(["a", "a"], {"a": 1, "b": 1}, 1) == 0.5


def test_recall_mrr_hit():
    rel = {"a": 1, "b": 1, "z": 0}
    ranked = ["x", "b", "y", "a"]
    assert recall_at_k(ranked, rel, 2) == 0.5
    assert recall_at_k(ranked, rel, 4) == 1.0
    assert mrr_at_k(ranked, rel, 10) == 0.5
    assert mrr_at_k(ranked, rel, 1) == 0.0
    assert hit_at_k(ranked, rel, 1) == 0.0
    assert hit_at_k(ranked, rel, 2) == 1.0
    assert mrr_at_k(["z"], rel, 10) == 0.0  # judged non-relevant (0) is not relevant


def test_evaluate_run_means_over_judged_queries_only():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": ["a"], "q2": ["x", "y"]}  # q3 has no relevant doc: skipped; missing runs score 0
    scores = evaluate_run(run, qrels)
    assert scores["ndcg@10"] == pytest.approx(0.5)
    assert scores["mrr@10"] == pytest.approx(0.5)
    assert scores["recall@100"] == pytest.approx(0.5)
    assert scores["hit@5"] == pytest.approx(0.5)
    assert set(scores) == {"ndcg@10", "recall@10", "recall@100", "mrr@10", "hit@5"}


def test_percentile_and_text_metrics():
    assert percentile([10, 20, 30, 40], 50) == 25
    assert percentile([], 95) == 0.0
    assert token_f1("The cat sat", "cat sat down") == pytest.approx(2 * (1.0 * 2 / 3) / (1.0 + 2 / 3))
    assert token_f1("", "") == 1.0
    assert token_f1("dog", "cat") == 0.0
    assert contains_answer("It was in 1961, in summer.", ["1961"])
    assert not contains_answer("nothing here", ["RNA interference"])
