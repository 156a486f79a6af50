"""`kbbot eval scale` end to end at a tiny size: build, a fresh measuring process, every field reported."""

import json

from bot.cli import main

TOPICS = [
    ("Boundary layers", "laminar boundary layer flow over a flat plate becomes turbulent at high Reynolds numbers"),
    ("Heat transfer", "heat transfer in supersonic flow over cones depends strongly on the Mach number"),
    ("Library indexing", "subject indexing of library catalogues helps readers find documents by topic"),
    ("Vitamin D", "vitamin D deficiency is associated with a higher risk of bone fractures in older adults"),
    ("Protein folding", "chaperone proteins assist the folding of newly made polypeptides in the cell"),
    ("Sourdough", "a sourdough starter of wild yeast and lactic acid bacteria makes bread rise slowly"),
]


def make_corpus(root):
    """A BEIR-layout dataset of six multi-chunk documents and four queries."""
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for i, (title, fact) in enumerate(TOPICS):
            sentences = [f"Study {n} of {title.lower()} found that {fact}, in sample {n * 7 + i}." for n in range(40)]
            out.write(json.dumps({"_id": f"d{i}", "title": title, "text": " ".join(sentences)}) + "\n")
    queries = ["what makes a boundary layer turbulent", "vitamin D and fractures", "how do libraries index", "bread"]
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(queries)), encoding="utf-8"
    )
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n", encoding="utf-8")
    return root


def test_eval_scale_builds_and_measures_in_a_fresh_process(tmp_path, monkeypatch, capsys):
    """Embedded, then server mode over the same build (`--serve-embedded-build`): one build, two measurements."""
    corpus = make_corpus(tmp_path / "tiny")
    monkeypatch.setenv("KBBOT_DATA_DIR", str(tmp_path / "data"))
    args = ["eval", "scale", "--sizes", "400", "--datasets", str(corpus), "--queries", "4", "--json"]
    assert main([*args, "--store", "both", "--serve-embedded-build"]) == 0
    out = json.loads(capsys.readouterr().out)
    run, served = out["runs"]
    assert run["store"] == "embedded" and not run["reused"]
    assert run["chunks"] >= 400 and run["real_chunks"] > 0
    assert run["synthesised_chunks"] == run["chunks"] - run["real_chunks"]
    for field in (
        "search_p50_ms",
        "search_p95_ms",
        "ask_p50_ms",
        "ask_p95_ms",
        "peak_rss_mb",
        "disk_mb",
        "cold_start_s",
        "publish_one_s",
    ):
        assert run[field] > 0, field
    assert run["search_p50_ms"] <= run["search_p95_ms"] and run["ask_p50_ms"] <= run["ask_p95_ms"]
    assert run["queries"] == 4 and sum(run["ask_statuses"].values()) == 4
    assert run["publish_one_ok"] is True
    assert run["ingest_warm_up_s"] >= 0  # the first publish's chunker import, timed apart
    assert "ask_p95_ms" in out["goals"]["100000"]
    assert served["store"] == "server" and served["reused"] and served["built_through"] == "embedded"
    assert served["chunks"] == run["chunks"] and sum(served["ask_statuses"].values()) == 4
    assert served["ask_p95_ms"] > 0 and served["cold_start_s"] > 0 and served["server_peak_rss_mb"] > 0
    assert served["publish_one_ok"] is True
    scale_dir = tmp_path / "data" / "eval" / "scale"
    assert not (scale_dir / "server-400").exists()  # nothing was built through the server
    assert (scale_dir / "embedded-400" / "server-scale-result.json").is_file()
