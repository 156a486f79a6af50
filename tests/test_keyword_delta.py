"""The incremental keyword index: a published version is appended, a retired one tombstoned, and both
score as a rebuild would rank them (the store then reuses it instead of re-reading every chunk)."""

import json

import numpy as np

from tools.keyword_index import KeywordIndex

BASE = [
    ("kb/boundary@v1#0", "Boundary layers\nLaminar boundary layers on flat plates become turbulent."),
    ("kb/boundary@v1#1", "Boundary layers\nTransition depends on the Reynolds number of the flow."),
    ("kb/heat@v1#0", "Heat transfer\nHeat transfer in supersonic flow over cones depends on the Mach number."),
    ("kb/heat@v1#1", "Heat transfer\nCooling of the wall lowers the recovery temperature."),
    ("kb/library@v1#0", "Library indexing\nSubject indexing of library catalogues helps readers find documents."),
    ("kb/vitamin@v1#0", "Vitamin D\nVitamin D deficiency is associated with bone fractures in older adults."),
]
ADDED = [
    ("kb/sourdough@v1#0", "Sourdough\nA sourdough starter of wild yeast makes bread rise."),
    ("kb/sourdough@v1#1", "Sourdough\nThe starter is fed with flour and water every day."),
    ("kb/heat@v2#0", "Heat transfer\nRadiative heat transfer dominates at hypersonic speeds."),
]


def build(rows):
    return KeywordIndex.build([cid for cid, _ in rows], [text for _, text in rows])


def test_update_appends_new_versions_and_tombstones_retired_ones(tmp_path):
    base = build(BASE)
    updated = base.updated([c for c, _ in ADDED], [t for _, t in ADDED], {"kb/heat@v1"})
    assert updated.lineage == base.lineage and updated.delta_size == 3
    assert updated.chunk_ids[: len(BASE)] == base.chunk_ids  # positions of the base never move
    live = set(updated.live_chunk_ids())
    assert live == {c for c, _ in BASE if not c.startswith("kb/heat@v1")} | {c for c, _ in ADDED}
    assert updated.live_versions() == {
        "kb/boundary@v1",
        "kb/library@v1",
        "kb/vitamin@v1",
        "kb/sourdough@v1",
        "kb/heat@v2",
    }

    # A term only the delta has is known and found; a retired version is never returned.
    assert updated.knows("sourdough") and not base.knows("sourdough")
    assert updated.search("sourdough starter", 3)[0][0].startswith("kb/sourdough@v1#")
    hits = [cid for cid, _ in updated.search("heat transfer", 10)]
    assert hits and hits[0] == "kb/heat@v2#0" and not any(c.startswith("kb/heat@v1") for c in hits)
    assert base.search("heat transfer", 1)[0][0].startswith("kb/heat@v1")  # the old index is untouched

    # The same ranking as an index rebuilt from the live chunks.
    rebuilt = build([(c, t) for c, t in BASE + ADDED if c in live])
    for query in ("sourdough bread", "boundary layer reynolds", "vitamin fractures", "heat transfer radiative"):
        assert [c for c, _ in updated.search(query, 3)] == [c for c, _ in rebuilt.search(query, 3)], query

    # Counted postings cover the delta too.
    counts = updated.term_counts({"sourdough", "starter"})
    assert counts[updated.position["kb/sourdough@v1#0"]] == 2

    # Saved and loaded, it scores the same; updated again, it keeps the lineage.
    base.save(tmp_path / "g1")
    updated.save(tmp_path / "g2")
    # The base is shared with the saved index of the same lineage (hard links), not written again.
    assert (tmp_path / "g2" / "stats.json").stat().st_ino == (tmp_path / "g1" / "stats.json").stat().st_ino
    loaded = KeywordIndex.load(tmp_path / "g2")
    assert loaded.lineage == updated.lineage and loaded.live_chunk_ids() == updated.live_chunk_ids()
    np.testing.assert_allclose(loaded.scores("sourdough heat"), updated.scores("sourdough heat"), rtol=1e-6)
    again = loaded.updated(["kb/pasta@v1#0"], ["Pasta\nFresh egg pasta is rolled thin."], {"kb/sourdough@v1"})
    assert again.search("pasta", 1)[0][0] == "kb/pasta@v1#0" and not again.search("sourdough", 5)


def test_an_index_with_a_large_delta_asks_for_a_rebuild():
    base = build(BASE)
    assert not base.wants_rebuild()
    many = [f"kb/d{i}@v1#0" for i in range(6000)]
    grown = base.updated(many, [f"Doc {i}\nword{i % 50} text" for i in range(6000)], set())
    assert grown.wants_rebuild()


def test_the_store_updates_its_index_on_publish_and_search_sees_it(service):
    """Through the real pipeline: publishing and replacing documents extends the index (same lineage) and
    the searcher's snapshot, never rebuilding either, and searches return only live chunks."""
    from tools.search import HybridSearcher

    kb = "delta"
    records = [(c.split("/")[1].split("@")[0] + ".txt", t.split("\n")[0], t.split("\n")[1]) for c, t in BASE[::2]]
    service.create_kb(kb, "Physics, libraries and bread.")
    assert service.ingestor.ingest_texts(kb, records).ok
    first = service.store.keyword_index(kb)
    searcher = HybridSearcher(service.store, service.embedder)
    assert searcher.search("laminar boundary layers", kb).evidence
    loaded = searcher._snapshots[kb]

    def no_reload(*args):
        raise AssertionError("the snapshot was read again instead of extended")

    searcher._load_snapshot = no_reload

    bread = ("sourdough.txt", "Sourdough", "A starter of wild yeast makes bread rise.")
    assert service.ingestor.ingest_texts(kb, [bread]).ok
    assert service.ingestor.ingest_texts(kb, [("heat.txt", "Heat transfer", "Radiative heat at hypersonic speeds.")]).ok
    second = service.store.keyword_index(kb)
    assert second.lineage == first.lineage and second.delta_size == 2 and len(second.removed) == 1
    assert set(second.live_chunk_ids()) == {c.chunk_id for c in service.store.live_chunks(kb)}

    hits = searcher.search("sourdough bread starter", kb).evidence
    assert hits[0].chunk.document == "sourdough.txt"
    heat = [e for e in searcher.search("heat transfer", kb).evidence if e.chunk.document == "heat.txt"]
    assert heat and all(e.chunk.version == 2 for e in heat)
    extended = searcher._snapshots[kb]
    assert len(extended.present) == len(second.chunk_ids) and extended.present.sum() == len(second.position)
    np.testing.assert_array_equal(extended.vectors[: len(loaded.present)], loaded.vectors)


def test_a_fresh_searcher_reads_the_saved_vectors_and_catches_up_from_chroma(service):
    """The vectors a searcher read are saved beside the keyword index; a new searcher (a restart) uses them
    and reads only chunks published since from the collection, with the same results."""
    from tools.search import HybridSearcher

    kb = "saved"
    service.create_kb(kb, "Physics, libraries and bread.")
    records = [(c.split("/")[1].split("@")[0] + ".txt", t.split("\n")[0], t.split("\n")[1]) for c, t in BASE[::2]]
    assert service.ingestor.ingest_texts(kb, records).ok
    assert HybridSearcher(service.store, service.embedder).search("laminar boundary layers", kb).evidence
    assert list(service.store.keyword_dir(kb).glob("vectors-*.npz"))
    assert service.ingestor.ingest_texts(kb, [("sourdough.txt", "Sourdough", "Wild yeast makes bread rise.")]).ok

    fresh = HybridSearcher(service.store, service.embedder)
    fetched: list[int] = []
    real_fetch = fresh._fetch_vectors
    fresh._fetch_vectors = lambda kb_, ids: fetched.append(len(ids)) or real_fetch(kb_, ids)
    assert fresh.search("sourdough bread", kb).evidence[0].chunk.document == "sourdough.txt"
    assert fetched == [1]  # only the published chunk came from Chroma
    from_chroma = HybridSearcher(service.store, service.embedder)
    from_chroma._saved_snapshot = lambda kb_, keyword: None
    for query in ("laminar boundary layers", "sourdough bread", "library catalogues"):
        expected = [(e.chunk_id, round(e.score, 5)) for e in from_chroma.search(query, kb).evidence]
        assert [(e.chunk_id, round(e.score, 5)) for e in fresh.search(query, kb).evidence] == expected


def test_live_versions_carried_through_updates_equal_a_fresh_count():
    base = build(BASE)
    assert base.live_versions() == {cid.split("#")[0] for cid, _ in BASE}  # worked out, then carried forward
    added = base.updated([c for c, _ in ADDED], [t for _, t in ADDED], {"kb/heat@v1"})
    retired = added.updated([], [], {"kb/sourdough@v1", "kb/library@v1"})
    for index in (added, retired):
        fresh = KeywordIndex(
            index.chunk_ids, index.bm25, index.chunk_documents, index.documents, index.document_weight,
            index.base_size, index.delta, index.removed, index.lineage, index.stats,
        )  # fmt: skip
        assert index.live_versions() == fresh.live_versions()
    assert retired.live_versions() == {"kb/boundary@v1", "kb/vitamin@v1", "kb/heat@v2"}


def test_a_loaded_index_maps_its_base_and_reads_deltas_saved_as_term_lists(tmp_path):
    base = build(BASE)
    updated = base.updated([c for c, _ in ADDED], [t for _, t in ADDED], set())
    updated.save(tmp_path / "g2")
    loaded = KeywordIndex.load(tmp_path / "g2")
    # The base's postings are read from the saved files as needed, not copied into the process.
    assert isinstance(loaded.bm25.scores["data"], np.memmap)
    assert isinstance(loaded.documents.scores["indices"], np.memmap)
    np.testing.assert_allclose(loaded.scores("sourdough heat"), updated.scores("sourdough heat"), rtol=1e-6)

    # A delta segment as kbbot wrote it before terms were packed (a list of terms per text) loads the same.
    for segment in json.loads((tmp_path / "g2" / "delta.json").read_text(encoding="utf-8"))["segments"]:
        path = tmp_path / "g2" / segment[0]
        part = json.loads(path.read_text(encoding="utf-8"))
        part["chunk_terms"] = [t.split(" ") for t in part.pop("packed_chunk_terms")]
        part["document_terms"] = [t.split(" ") for t in part.pop("packed_document_terms")]
        path.write_text(json.dumps(part), encoding="utf-8")
    old_layout = KeywordIndex.load(tmp_path / "g2")
    for query in ("sourdough starter", "heat transfer radiative", "flour water"):
        assert old_layout.search(query, 3) == loaded.search(query, 3), query
    again = old_layout.updated(["kb/pasta@v1#0"], ["Pasta\nFresh egg pasta is rolled thin."], {"kb/sourdough@v1"})
    again.save(tmp_path / "g3")
    assert KeywordIndex.load(tmp_path / "g3").search("pasta", 1)[0][0] == "kb/pasta@v1#0"
