"""The store's invariants, checked against the real registry, Chroma collection and keyword index.

`violations(service)` lists every broken invariant, one readable line each (empty: consistent):

- no document and no version is `processing` (unless `running=True`: an ingest may be in flight);
- a `failed` document has a reason and no live version;
- a `ready` document has a live version with chunks, and EVERY one of them (kb/doc@vN#0..n-1) is in
  the KB's current Chroma collection, is returned by `store.get_chunks`, and is in the keyword index
  of the KB's current generation — so it is retrievable both ways;
- the keyword index holds nothing else (no chunk of a version that is not live).

`lost(service)` counts ready documents whose live chunks are not all retrievable (what the
reliability figures call "lost"). Use `assert_consistent(service)` in tests.
"""

from __future__ import annotations

from tools.store import chunk_id_for


def violations(service, running: bool = False) -> list[str]:  # noqa: ANN001 - a KnowledgeService
    store = service.store
    problems: list[str] = []
    for record in store.registry.list_kbs():
        kb = record.name
        expected: set[str] = set()
        for doc in store.registry.list_documents(kb):
            where = f"{kb}/{doc.name}"
            if doc.state == "processing":
                if not running:
                    problems.append(f"{where}: still processing")
                continue
            if doc.state == "failed":
                if not doc.error:
                    problems.append(f"{where}: failed without a reason")
                if doc.live_version is not None:
                    problems.append(f"{where}: failed but has live version {doc.live_version}")
                continue
            if doc.live_version is None or doc.live_chunks <= 0:
                problems.append(
                    f"{where}: ready without chunks (live version {doc.live_version}, {doc.live_chunks} chunks)"
                )
                continue
            ids = [chunk_id_for(kb, doc.name, doc.live_version, i) for i in range(doc.live_chunks)]
            expected.update(ids)
            found = set(store.collection(kb).get(ids=ids, include=[])["ids"])
            if found != set(ids):
                problems.append(
                    f"{where}: ready but {len(set(ids) - found)}/{len(ids)} live chunks missing from Chroma"
                )
            served = {c.chunk_id for c in store.get_chunks(kb, ids)}
            if served != set(ids):
                problems.append(f"{where}: ready but {len(set(ids) - served)}/{len(ids)} live chunks not served")
        if not running:
            processing = [(d, v) for d, v, state in _versions(store, kb) if state == "processing"]
            if processing:
                problems.append(f"{kb}: versions still processing: {processing}")
        indexed = set(store.keyword_index(kb).live_chunk_ids())
        if indexed != expected:
            missing, extra = expected - indexed, indexed - expected
            problems.append(
                f"{kb}: keyword index differs from the live chunks (missing {sorted(missing)[:5]}, "
                f"extra {sorted(extra)[:5]})"
            )
    return problems


def lost(service) -> int:  # noqa: ANN001
    """Ready documents that are not fully retrievable."""
    problems = violations(service, running=True)
    return len({p.split(":", 1)[0] for p in problems if "ready without chunks" in p or ": ready but" in p})


def assert_consistent(service, running: bool = False) -> None:  # noqa: ANN001
    problems = violations(service, running=running)
    assert not problems, "store invariants broken:\n  " + "\n  ".join(problems)


def _versions(store, kb: str) -> list[tuple[str, int, str]]:  # noqa: ANN001
    with store.registry._connect() as db:
        rows = db.execute("SELECT document, version, state FROM versions WHERE kb = ?", (kb,)).fetchall()
    return [(r["document"], int(r["version"]), r["state"]) for r in rows]
