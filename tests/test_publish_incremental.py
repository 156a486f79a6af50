"""Publishing into a big KB costs what changed, not the KB's size: the registry logs what each generation changed
(the keyword index catches up from those rows instead of every document's row), the index's position map is
layered, retired versions are found from their chunks, and the base's ids are saved once. The guarantees stay:
an index of what kbbot wrote before loads, a crash between the flip and the index save is caught up from the
log, and whatever cannot be caught up is read in full, as before."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import tools.registry as registry_module
from tools.keyword_index import KeywordIndex
from tools.registry import LiveChange, Registry
from tools.service import KnowledgeService

KB = "pub"


def _publish(registry: Registry, document: str, chunks: int) -> int:
    """Begin and flip one version of `document` with `chunks` chunks; its version number."""
    (pending,) = registry.begin_versions(KB, [(document, f"hash-{document}-{chunks}")])
    (published,) = registry.publish_versions([(pending, f"hash-{document}-{chunks}", chunks, None, None)])
    assert published.live
    return pending.version


def test_the_registry_logs_what_each_generation_changed(tmp_path: Path, monkeypatch) -> None:
    registry = Registry(tmp_path / "registry.sqlite3")
    registry.upsert_kb(KB, "", "model", 4, "collection-1")
    start = registry.generation(KB)
    assert registry.live_changes(KB, start) == (start, {})

    _publish(registry, "a.txt", 3)
    _publish(registry, "b.txt", 2)
    after_two = registry.generation(KB)
    new_a, new_b = LiveChange(None, 0, 1, 3), LiveChange(None, 0, 1, 2)
    assert registry.live_changes(KB, start) == (after_two, {"a.txt": new_a, "b.txt": new_b})

    _publish(registry, "a.txt", 5)  # replaced: what the older index holds and what is live now
    assert registry.live_changes(KB, after_two) == (after_two + 1, {"a.txt": LiveChange(1, 3, 2, 5)})
    assert registry.live_changes(KB, start)[1]["a.txt"] == LiveChange(None, 0, 2, 5)
    registry.delete_document(KB, "b.txt")
    deleted = LiveChange(1, 2, None, 0)
    assert registry.live_changes(KB, after_two)[1] == {"a.txt": LiveChange(1, 3, 2, 5), "b.txt": deleted}

    # The log agrees with the full read it stands in for.
    generation, live = registry.live_chunk_counts(KB)
    assert live == {"a.txt": (2, 5)} and registry.live_changes(KB, start)[0] == generation

    # A generation made without a row (a reindex's switch) cannot be caught up from: None, read in full.
    assert registry.switch_collection(KB, "collection-2", "model", 4)
    assert registry.live_changes(KB, generation) is None
    assert registry.live_changes(KB, registry.generation(KB)) == (registry.generation(KB), {})

    # Rows older than LIVE_CHANGES_KEPT generations are dropped; an index that far behind reads in full.
    monkeypatch.setattr(registry_module, "LIVE_CHANGES_KEPT", 2)
    before = registry.generation(KB)
    for _ in range(3):
        _publish(registry, "c.txt", 1)
    assert registry.live_changes(KB, before) is None
    assert registry.live_changes(KB, registry.generation(KB) - 1) is not None

    # A KB deleted and created again starts with no log of the old one.
    registry.delete_kb(KB)
    registry.upsert_kb(KB, "", "model", 4, "collection-3")
    assert registry.live_changes(KB, registry.generation(KB)) == (registry.generation(KB), {})


BASE = [
    ("kb/boundary@v1#0", "Boundary layers\nLaminar boundary layers on flat plates become turbulent."),
    ("kb/boundary@v1#1", "Boundary layers\nTransition depends on the Reynolds number of the flow."),
    ("kb/heat@v1#0", "Heat transfer\nHeat transfer in supersonic flow over cones depends on the Mach number."),
    ("kb/heat@v1#1", "Heat transfer\nCooling of the wall lowers the recovery temperature."),
    ("kb/odd@v1#3", "Odd numbering\nChunks of this version are not numbered from zero."),
    ("kb/vitamin@v1#0", "Vitamin D\nVitamin D deficiency is associated with bone fractures in older adults."),
]


def _fresh_positions(index: KeywordIndex) -> dict[str, int]:
    return {cid: i for i, cid in enumerate(index.chunk_ids) if i not in index.removed}


def test_layered_positions_equal_a_fresh_map_through_updates_and_a_save(tmp_path: Path) -> None:
    base = KeywordIndex.build([c for c, _ in BASE], [t for _, t in BASE])
    steps = [
        (["kb/sourdough@v1#0", "kb/sourdough@v1#1"], ["Sourdough\nWild yeast.", "Sourdough\nFlour and water."], set()),
        (["kb/heat@v2#0"], ["Heat transfer\nRadiative heat transfer at hypersonic speeds."], {"kb/heat@v1"}),
        ([], [], {"kb/sourdough@v1", "kb/odd@v1"}),  # one in the delta; one found by a pass (not from #0)
    ]
    index = base
    for ids, texts, retired in steps:
        index = index.updated(ids, texts, retired)
        assert dict(index.position) == _fresh_positions(index)
        assert len(index.position) == len(_fresh_positions(index))
        assert all(index.position.get(c) is None for c in index.chunk_ids if c.split("#")[0] in retired)
    assert index.holds_version("kb/heat@v2") and not index.holds_version("kb/heat@v1")
    assert set(index.live_chunk_ids()) == {"kb/boundary@v1#0", "kb/boundary@v1#1", "kb/heat@v2#0", "kb/vitamin@v1#0"}
    assert dict(base.position) == _fresh_positions(base)  # the older index is untouched

    base.save(tmp_path / "g1")
    index.save(tmp_path / "g4")
    # The base's ids are written once and linked by the update, like the rest of the base.
    assert (tmp_path / "g4" / "base_ids.json").stat().st_ino == (tmp_path / "g1" / "base_ids.json").stat().st_ino
    assert not (tmp_path / "g4" / "chunk_ids.json").exists()
    loaded = KeywordIndex.load(tmp_path / "g4")
    assert loaded.chunk_ids == index.chunk_ids and dict(loaded.position) == dict(index.position)
    np.testing.assert_allclose(loaded.scores("heat transfer boundary"), index.scores("heat transfer boundary"))


def _as_written_before(directory: Path) -> None:
    """Turn a saved index into the layout kbbot wrote before base_ids.json: every id in chunk_ids.json."""
    extra = json.loads((directory / "delta.json").read_text(encoding="utf-8"))
    ids = json.loads((directory / "base_ids.json").read_text(encoding="utf-8"))
    delta = {"chunk_terms": [], "document_terms": [], "chunk_documents": []}
    for name, _chunks, _documents in extra.pop("segments"):
        segment = json.loads((directory / name).read_text(encoding="utf-8"))
        ids += segment.pop("ids")
        for key, values in segment.items():  # terms were lists then, not packed into a string per text
            unpacked = key.startswith("packed_")
            delta[key.removeprefix("packed_")] += [v.split(" ") for v in values] if unpacked else values
        (directory / name).unlink()
    (directory / "chunk_ids.json").write_text(json.dumps(ids), encoding="utf-8")
    (directory / "base_ids.json").unlink()
    (directory / "delta.json").write_text(json.dumps({**extra, "delta": delta}), encoding="utf-8")


def test_an_index_in_the_earlier_layout_loads_and_updates(tmp_path: Path) -> None:
    base = KeywordIndex.build([c for c, _ in BASE], [t for _, t in BASE])
    grown = base.updated(["kb/sourdough@v1#0"], ["Sourdough\nWild yeast makes bread rise."], {"kb/heat@v1"})
    base.save(tmp_path / "g1")
    grown.save(tmp_path / "g2")
    for name in ("g1", "g2"):
        _as_written_before(tmp_path / name)
    old = KeywordIndex.load(tmp_path / "g2")
    assert old.chunk_ids == grown.chunk_ids and old.removed == grown.removed and old.lineage == grown.lineage
    np.testing.assert_allclose(old.scores("sourdough heat boundary"), grown.scores("sourdough heat boundary"))

    shutil.rmtree(tmp_path / "g1")
    again = old.updated(["kb/pasta@v1#0"], ["Pasta\nFresh egg pasta is rolled thin."], {"kb/sourdough@v1"})
    again.save(tmp_path / "g3")  # links the old layout's base, its chunk_ids.json standing in for base_ids.json
    for mine, theirs in (("stats.json", "stats.json"), ("base_ids.json", "chunk_ids.json")):
        assert (tmp_path / "g3" / mine).stat().st_ino == (tmp_path / "g2" / theirs).stat().st_ino
    reloaded = KeywordIndex.load(tmp_path / "g3")
    assert reloaded.chunk_ids == again.chunk_ids
    assert reloaded.search("pasta", 1)[0][0] == "kb/pasta@v1#0" and not reloaded.search("sourdough", 5)


def _no_full_read(*args, **kwargs):
    raise AssertionError("the keyword index read every document's row instead of the log")


def _documents(n: int, topic: str) -> list[tuple[str, str, str]]:
    return [
        (f"{topic}-{i}.txt", f"{topic.title()} {i}", f"Notes on {topic} number {i} and its details.") for i in range(n)
    ]


def _assert_index_is_the_live_kb(service: KnowledgeService) -> KeywordIndex:
    index = service.store.keyword_index(KB)
    live = [c for c in service.store.live_chunks(KB)]
    assert set(index.live_chunk_ids()) == {c.chunk_id for c in live}
    rebuilt = KeywordIndex.build([c.chunk_id for c in live], [f"{c.header}\n{c.text}" for c in live])
    for query in ("sourdough starter", "laminar boundary", "hypersonic heat"):
        assert [c for c, _ in index.search(query, 3)] == [c for c, _ in rebuilt.search(query, 3)], query
    return index


def test_publishing_catches_the_index_up_from_the_log_and_survives_a_crash_before_its_save(settings) -> None:
    with KnowledgeService(settings.tools) as service:
        service.create_kb(KB, "Bread and physics.")
        assert service.ingestor.ingest_texts(KB, _documents(3, "laminar boundary")).ok
        first = service.store.keyword_index(KB)

        service.store.registry.live_chunk_counts = _no_full_read  # every update below comes from the log
        bread = ("sourdough.txt", "Sourdough", "A sourdough starter of wild yeast makes bread rise.")
        assert service.ingestor.ingest_texts(KB, [bread]).ok
        replaced = ("laminar boundary-1.txt", "Heat", "Hypersonic heat transfer at the wall.")
        assert service.ingestor.ingest_texts(KB, [replaced]).ok
        service.delete_document(KB, "laminar boundary-2.txt")
        index = _assert_index_is_the_live_kb(service)
        assert index.lineage == first.lineage and index.delta_size == 2 and len(index.removed) == 2

    # A crash between the flip and the index's save: the flip committed, the saved index is a generation behind.
    generation = _publish_then_crash_before_the_index_save(settings, [("pasta.txt", "Pasta", "Fresh egg pasta.")])
    with KnowledgeService(settings.tools) as service:
        service.store.registry.live_chunk_counts = _no_full_read
        index = _assert_index_is_the_live_kb(service)
        assert index.lineage == first.lineage  # updated from the log, not rebuilt (a rebuild is a new lineage)
        assert index.search("pasta", 1)[0][0].startswith(f"{KB}/pasta.txt@v1#")
        assert (service.store.keyword_dir(KB) / f"g{generation}").is_dir()  # caught up and saved


def _publish_then_crash_before_the_index_save(settings, records: list[tuple[str, str, str]]) -> int:
    """Publish `records` in a service of its own, then put back the keyword index saved before: the data dir as a
    process killed between the registry's flip and the index's save leaves it. The generation published."""
    with KnowledgeService(settings.tools) as service:
        root = service.store.keyword_dir(KB)
        (before,) = [d for d in root.glob("g*") if d.name[1:].isdigit()]
        shutil.copytree(before, root.parent / "kept")
        assert service.ingestor.ingest_texts(KB, records).ok
        generation = service.store.registry.generation(KB)
    shutil.rmtree(root / f"g{generation}")
    (root.parent / "kept").rename(before)
    return generation


def test_a_generation_not_logged_is_read_in_full(settings) -> None:
    """Documents published by a kbbot that kept no log (its rows are missing): the index reads every row, as it
    did before, and is right."""
    with KnowledgeService(settings.tools) as service:
        service.create_kb(KB, "Bread and physics.")
        assert service.ingestor.ingest_texts(KB, _documents(2, "laminar boundary")).ok
        service.store.keyword_index(KB)
        registry_path = service.store.registry.path
    bread = ("sourdough.txt", "Sourdough", "A sourdough starter of wild yeast makes bread rise.")
    _publish_then_crash_before_the_index_save(settings, [bread])
    with sqlite3.connect(registry_path) as db:
        db.execute("DELETE FROM live_changes")
    with KnowledgeService(settings.tools) as service:
        reads: list[int] = []
        full_read = service.store.registry.live_chunk_counts
        service.store.registry.live_chunk_counts = lambda kb: reads.append(1) or full_read(kb)
        index = _assert_index_is_the_live_kb(service)
        assert reads == [1] and index.search("sourdough", 1)[0][0].startswith(f"{KB}/sourdough.txt@")


@pytest.mark.parametrize("retire", ["base", "delta"])
def test_a_retired_version_is_found_without_a_pass_over_every_id(retire: str) -> None:
    base = KeywordIndex.build([c for c, _ in BASE], [t for _, t in BASE])
    grown = base.updated(["kb/bread@v1#0", "kb/bread@v1#1"], ["Bread\nFlour.", "Bread\nWater."], set())
    version = "kb/heat@v1" if retire == "base" else "kb/bread@v1"
    walked: list[str] = []
    positions = grown.position

    class Watched(type(positions)):  # counts how many ids the update iterates over
        def __iter__(self):
            for cid in super().__iter__():
                walked.append(cid)
                yield cid

    positions.__class__ = Watched
    retired = grown.updated([], [], {version})
    assert not walked
    assert {grown.chunk_ids[i] for i in retired.removed} == {c for c in grown.chunk_ids if c.startswith(version)}


def _rebuilt_postings(index: KeywordIndex) -> KeywordIndex:
    """The same index with its delta's postings built from scratch (as a load does)."""
    return KeywordIndex(
        index.chunk_ids, index.bm25, index.chunk_documents, index.documents, index.document_weight,
        index.base_size, index.delta, index.removed, index.lineage, index.stats,
    )  # fmt: skip


def test_the_delta_is_extended_and_saved_in_segments_not_rewritten(tmp_path: Path) -> None:
    base = KeywordIndex.build([c for c, _ in BASE], [t for _, t in BASE])
    base.save(tmp_path / "g1")
    first = base.updated(
        ["kb/bread@v1#0", "kb/bread@v1#1"], ["Bread\nSourdough starter of wild yeast.", "Bread\nFlour, water."], set()
    )
    first.save(tmp_path / "g2")
    second = first.updated(["kb/heat@v2#0"], ["Heat transfer\nRadiative heat transfer, wild speeds."], {"kb/heat@v1"})
    second.save(tmp_path / "g3")

    # Extended postings score exactly as postings built from the whole delta; the older index is untouched.
    for query in ("wild heat transfer", "sourdough flour", "boundary layers"):
        for index in (first, second):
            np.testing.assert_array_equal(index.scores(query), _rebuilt_postings(index).scores(query))
    assert not first.search("radiative", 1) and second.search("radiative", 1)[0][0] == "kb/heat@v2#0"

    def segments(name: str) -> list[str]:
        return [s[0] for s in json.loads((tmp_path / name / "delta.json").read_text(encoding="utf-8"))["segments"]]

    (one,) = segments("g2")
    assert segments("g3")[0] == one and len(segments("g3")) == 2
    assert (tmp_path / "g3" / one).stat().st_ino == (tmp_path / "g2" / one).stat().st_ino  # linked, not rewritten
    newest = json.loads((tmp_path / "g3" / segments("g3")[1]).read_text(encoding="utf-8"))
    assert newest["ids"] == ["kb/heat@v2#0"]  # the save wrote what this update appended, nothing more
    loaded = KeywordIndex.load(tmp_path / "g3")
    assert loaded.chunk_ids == second.chunk_ids and loaded.removed == second.removed
    np.testing.assert_array_equal(loaded.scores("wild heat transfer"), second.scores("wild heat transfer"))

    # With the earlier segments gone (their index was removed), the whole delta is written again as one.
    third = loaded.updated(["kb/pasta@v1#0"], ["Pasta\nFresh egg pasta."], set())
    for name in ("g2", "g3"):
        shutil.rmtree(tmp_path / name)
    third.save(tmp_path / "g4")
    (whole,) = segments("g4")
    assert len(json.loads((tmp_path / "g4" / whole).read_text(encoding="utf-8"))["ids"]) == third.delta_size == 4
    assert KeywordIndex.load(tmp_path / "g4").search("pasta", 1)[0][0] == "kb/pasta@v1#0"


def test_the_stores_live_map_is_caught_up_from_the_log(settings) -> None:
    """What dense search filters by (document -> live version, live chunks) follows publishes and deletes from
    the log, equal to a full read, without one; a generation not logged is read in full."""
    with KnowledgeService(settings.tools) as service:
        service.create_kb(KB, "Bread and physics.")
        assert service.ingestor.ingest_texts(KB, _documents(3, "laminar boundary")).ok
        store, registry = service.store, service.store.registry
        store.live_versions(KB)
        full_read = registry.live_snapshot
        registry.live_snapshot = lambda kb: _no_full_read()
        assert service.ingestor.ingest_texts(KB, [("sourdough.txt", "Sourdough", "Wild yeast makes bread rise.")]).ok
        assert service.ingestor.ingest_texts(KB, [("laminar boundary-1.txt", "Heat", "Hypersonic heat.")]).ok
        service.delete_document(KB, "laminar boundary-2.txt")
        assert store._live_snapshot(KB) == full_read(KB)
        assert set(store.live_versions(KB)) == {"laminar boundary-0.txt", "laminar boundary-1.txt", "sourdough.txt"}
        hits = store.dense_search(KB, service.embedder.embed_query("wild yeast bread"), 10)
        assert {c.document for c, _ in hits} == set(store.live_versions(KB))

        with sqlite3.connect(registry.path) as db:  # the next generation is made by a kbbot that kept no log
            db.execute("UPDATE kbs SET generation = generation + 1 WHERE name = ?", (KB,))
        reads: list[int] = []
        registry.live_snapshot = lambda kb: reads.append(1) or full_read(kb)
        assert store._live_snapshot(KB) == full_read(KB) and reads == [1]


def test_a_publish_finds_every_row_it_touches_by_key(tmp_path: Path) -> None:
    """No statement of a begin + flip + delete scans the KB's versions or documents (at a million chunks a scan is
    seconds): each is answered from a key. Checked on SQLite's own query plans of the statements as they ran."""
    registry = Registry(tmp_path / "registry.sqlite3")
    registry.upsert_kb(KB, "", "model", 4, "collection-1")
    for n in range(30):
        _publish(registry, f"doc-{n}.txt", 2)
    statements: list[str] = []
    with registry._connect() as db:
        db.set_trace_callback(statements.append)
        _publish(registry, "doc-3.txt", 4)  # replaces a live version
        _publish(registry, "new.txt", 1)
        registry.delete_document(KB, "doc-5.txt")
        registry.recover_interrupted(KB)
        registry.stale_versions(KB)
        registry.live_changes(KB, registry.generation(KB) - 3)
        db.set_trace_callback(None)
        for sql in statements:
            if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
                continue
            plan = " | ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert not re.search(r"SCAN (?!CONSTANT ROW)", plan), (sql, plan)
            if "document = " in sql and "FROM versions" in sql or sql.startswith("UPDATE versions"):
                assert "versions_by_state" not in plan, (sql, plan)  # a document's versions: by its key
