"""Tiny end-to-end `kbbot eval retrieval` and `kbbot eval routing` runs on generated BEIR-layout datasets."""

import json

from bot.cli import main

DOCS = [
    ("d1", "Boundary layer flow", "Laminar boundary layers on flat plates become turbulent at high Reynolds numbers."),
    ("d2", "Heat transfer", "Heat transfer in supersonic flow over cones depends on the Mach number."),
    ("d3", "Library indexing", "Subject indexing of library catalogues helps readers find documents by topic."),
    ("d4", "Vitamin D", "Vitamin D deficiency is associated with a higher risk of bone fractures in older adults."),
    ("d5", "Protein folding", "Chaperone proteins assist the folding of newly made polypeptides in the cell."),
]
QUERIES = [
    ("q1", "transition of a laminar boundary layer to turbulence"),
    ("q2", "vitamin D and bone fractures"),
    ("q3", "how do libraries index documents by subject"),
]
QRELS = [("q1", "d1", 2), ("q2", "d4", 1), ("q3", "d3", 1)]


def make_dataset(root, docs=DOCS, queries=QUERIES, qrels=QRELS):
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs), encoding="utf-8"
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries), encoding="utf-8"
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels), encoding="utf-8"
    )
    return root


def test_eval_retrieval_json(tmp_path, monkeypatch, capsys):
    dataset = make_dataset(tmp_path / "tiny")
    monkeypatch.setenv("KBBOT_DATA_DIR", str(tmp_path / "data"))
    args = ["eval", "retrieval", "--dataset", str(dataset), "--ingest-sample", "2", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dataset"] == "tiny" and out["queries"] == 3 and out["documents"] == 5
    assert set(out["systems"]) == {"kbbot", "bm25", "dense", "llamaindex"}
    for name, row in out["systems"].items():
        for field in ("ndcg@10", "recall@10", "recall@100", "mrr@10", "hit@5", "p50_ms", "p95_ms"):
            assert field in row, (name, field)
        assert row["recall@100"] == 1.0, name  # 5 documents: everything is in the top 100
    assert out["systems"]["kbbot"]["ndcg@10"] >= 0.9
    assert out["ingest"]["sample_docs"] == 2 and out["ingest"]["kbbot_ingest_s"] > 0
    ingest = out["ingest"]
    assert ingest["ratio_vs_bare_docs"] > 0 and ingest["ratio_vs_bare_chunks"] > 0 and ingest["bare_backend"] == "torch"
    assert len(ingest["bare_encode_docs_runs_s"]) == 2  # before and after kbbot's ingest (interleaved)
    assert ingest["kbbot_ingest_cpu_s"] > 0 and ingest["cpu_ratio_vs_bare_docs"] > 0
    assert ingest["cpu_ratio_vs_bare_chunks"] > 0
    # kbbot embeds every document's title again on each of its chunks: never fewer word pieces than the documents
    assert ingest["word_pieces_kbbot"] >= ingest["word_pieces_bare_docs"] > 0
    assert not out["kb_build"]["reused"]

    # A rerun reuses the KB and the cached embeddings, and says so.
    assert main(args[:-3] + ["--ingest-sample", "0", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["kb_build"]["reused"] is True
    assert any("reused" in n for n in again["notes"])
    assert again["systems"]["kbbot"] == {**again["systems"]["kbbot"], "ndcg@10": out["systems"]["kbbot"]["ndcg@10"]}


SECOND_DOCS = [
    ("s1", "Sourdough", "Sourdough bread rises with a starter of wild yeast and lactic acid bacteria."),
    ("s2", "Espresso", "Espresso is brewed by forcing hot water through finely ground coffee at high pressure."),
    ("s3", "Pasta", "Fresh egg pasta is rolled thin and cooked for two to three minutes in salted water."),
]
SECOND_QUERIES = [("c1", "how does a sourdough starter make bread rise"), ("c2", "how is espresso coffee brewed")]
SECOND_QRELS = [("c1", "s1", 1), ("c2", "s2", 1)]


def test_eval_routing_json_runs_the_engine_over_two_kbs(tmp_path, monkeypatch, capsys):
    science = make_dataset(tmp_path / "science")
    cooking = make_dataset(tmp_path / "cooking", SECOND_DOCS, SECOND_QUERIES, SECOND_QRELS)
    monkeypatch.setenv("KBBOT_DATA_DIR", str(tmp_path / "data"))
    assert main(["eval", "routing", "--datasets", f"{science},{cooking}", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == 5 and out["mode"] == "offline"
    assert out["top1_accuracy"] == 1.0, out["confusion"]
    loo = out["leave_one_out"]
    assert len(loo["cases"]) == 2 and 0.0 <= loo["refused_rate"] <= 1.0
    # Asked of a store without their KB, the cooking questions find no science to answer them from.
    cooking_kb = out["kbs"][1]
    assert loo["cases"][cooking_kb]["refused_rate"] == 1.0, loo["cases"]
