"""`kbbot eval scale` builds resume: a restarted build publishes only what is missing, a larger size extends a
smaller build of the same recipe, and another recipe starts over. Tiny sizes, the real pipeline and model."""

import json
import shutil

import pytest
from helpers.settings import TEST_MODEL_CACHE
from test_eval_scale import TOPICS

from bot.core import KnowledgeBot, Origin
from bot.eval.scale import KB, SIDECAR, _settings, build
from bot.eval.workspace import EvalWorkspace


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("KBBOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KBBOT_MODEL_CACHE_DIR", str(TEST_MODEL_CACHE))  # exported once, shared by the tests
    workspace = EvalWorkspace(data_dir=tmp_path / "eval", progress=False)
    yield workspace
    workspace.bot.close()


def make_corpus(root):
    """A BEIR-layout dataset of six short documents (two chunks or so each): variants are cheap to make."""
    (root / "qrels").mkdir(parents=True)
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q0", "text": "boundary layers"}) + "\n", encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n", encoding="utf-8")
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for i, (title, fact) in enumerate(TOPICS):
            sentences = [f"Study {n} of {title.lower()} found that {fact}, in sample {n * 7 + i}." for n in range(14)]
            out.write(json.dumps({"_id": f"d{i}", "title": title, "text": " ".join(sentences)}) + "\n")
    return root


def documents(data_dir) -> dict[str, int]:
    """{document: live chunks} of the benchmark KB."""
    bot = KnowledgeBot(_settings(data_dir, None))
    try:
        (view,) = [v for v in bot.visible_kbs(Origin.cli()) if v.name == KB]
        return {d.name: d.chunks for d in view.documents if d.state == "ready"}
    finally:
        bot.close()


def test_a_restarted_build_publishes_only_the_missing_documents(ws, tmp_path):
    datasets = [str(make_corpus(tmp_path / "tiny"))]
    first = build(ws, 200, tmp_path / "kb", None, datasets, 0, False)
    assert first["complete"] and first["chunks"] >= 200 and first["sessions"] == 1
    built = documents(tmp_path / "kb")
    variants = sorted(name for name in built if name.startswith("v"))
    assert len(variants) > 10

    # As if the process died after the pool, with only part of the recombined documents published.
    bot = KnowledgeBot(_settings(tmp_path / "kb", None))
    try:
        for name in variants[::12]:
            bot.delete_document(Origin.cli(), KB, name)
    finally:
        bot.close()
    state = json.loads((tmp_path / "kb" / SIDECAR).read_text())
    rewound = {**state, "complete": False, "variants_done": 0, "chunks": first["real_chunks"]}
    (tmp_path / "kb" / SIDECAR).write_text(json.dumps(rewound))

    resumed = build(ws, 200, tmp_path / "kb", None, datasets, 0, False)
    assert not resumed["reused"] and resumed["sessions"] == 2 and resumed["complete"]
    assert documents(tmp_path / "kb") == built  # the same documents with the same chunks, none twice
    assert resumed["chunks"] == first["chunks"] and resumed["variants_done"] == first["variants_done"]
    assert resumed["synthesised_chunks"] == resumed["chunks"] - resumed["real_chunks"]

    again = build(ws, 200, tmp_path / "kb", None, datasets, 0, False)
    assert again["reused"]


def test_a_larger_size_extends_a_smaller_build_and_another_recipe_starts_over(ws, tmp_path):
    datasets = [str(make_corpus(tmp_path / "tiny"))]
    direct = build(ws, 400, tmp_path / "direct", None, datasets, 6, False)
    small = build(ws, 150, tmp_path / "grown", None, datasets, 6, False)
    assert small["chunks"] < direct["chunks"]
    grown = build(ws, 400, tmp_path / "grown", None, datasets, 6, False)
    assert grown["sessions"] == 2 and grown["chunks"] == direct["chunks"]
    assert documents(tmp_path / "grown") == documents(tmp_path / "direct")

    # Another pool (here: fewer real documents) is another recipe: nothing of the old KB is kept.
    shutil.copytree(tmp_path / "direct", tmp_path / "other")
    other = build(ws, 400, tmp_path / "other", None, datasets, 3, False)
    assert other["sessions"] == 1
    assert not set(documents(tmp_path / "other")) >= set(documents(tmp_path / "direct"))
