#!/usr/bin/env python
"""Time the per-publish steps that can grow with the KB (registry, recovery, keyword index), as a function of N,
without embedding N chunks: per checkout, interleaved.

    .venv/bin/python scripts/measure_publish_steps.py --sizes 100000,1000000 --variant main=/work/main \\
        --variant new=. --rounds 2 --work /tmp/publish-steps

For each size, a template data dir is made once (with the first variant's code): a KB whose registry has N/2
live documents of 2 chunks each, and a keyword index of those N chunks (short synthetic texts) saved for the
registry's generation, as an ingest would leave it. The chunks themselves are not in Chroma: publishing reads only
the new document's chunks from it. Each run copies the template, opens the store in a process with PYTHONPATH set
to its checkout, loads the keyword index (not timed: the start-up), then publishes three 3-chunk documents the way
tools/ingest.py does, minus parsing and the model: recovery (`store.recover`), begin, Chroma add, the registry's
flip, and the keyword index's catch-up and save. The first publish also pays for one-time migrations (an index
saved in an older layout); publishes 2 and 3 are the steady state. Wall and CPU seconds per step; the load
average with each row. This is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

KB = "steps"

SETUP = r"""
import sys, time
from pathlib import Path
from bot.config import load_settings
from tools.keyword_index import KeywordIndex
from tools.store import KnowledgeStore, chunk_id_for
data_dir, n = Path(sys.argv[1]), int(sys.argv[2])
(data_dir / "kb-declarations").mkdir(parents=True, exist_ok=True)
settings = load_settings(data_dir=data_dir, knowledge_bases_dir=data_dir / "kb-declarations", openai_api_key=None)
store = KnowledgeStore(settings.tools).open()
store.ensure_kb("steps", "synthetic", "synthetic-model", 4)
documents = n // 2
now = time.time()
with store.registry._transaction() as db:
    db.executemany(
        "INSERT INTO documents (kb, name, state, live_version, live_hash, live_chunks, updated_at)"
        " VALUES ('steps', ?, 'ready', 1, ?, 2, ?)", [(f"doc-{d}.txt", f"h{d}", now) for d in range(documents)])
    db.executemany(
        "INSERT INTO versions (kb, document, version, content_hash, state, chunks, started_at)"
        " VALUES ('steps', ?, 1, ?, 'ready', 2, ?)", [(f"doc-{d}.txt", f"h{d}", now) for d in range(documents)])
    db.executemany("INSERT INTO version_counters (kb, document, last_version) VALUES ('steps', ?, 1)",
                   [(f"doc-{d}.txt",) for d in range(documents)])
    db.execute("UPDATE kbs SET generation = generation + 1 WHERE name = 'steps'")
generation = store.registry.generation("steps")
ids = [chunk_id_for("steps", f"doc-{d}.txt", 1, i) for d in range(documents) for i in range(2)]
texts = [f"Document {d % 9973}\nterm{d % 5003} word{(d * 7 + i) % 2011} part{i}"
         for d in range(documents) for i in range(2)]
KeywordIndex.build(ids, texts).save(store.keyword_dir("steps") / f"g{generation}")
store.close()
"""

CHILD = r"""
import json, sys, time
from pathlib import Path
from bot.config import load_settings
from tools.store import KnowledgeStore, StoredChunk, chunk_id_for, chunk_to_node
data_dir = Path(sys.argv[1])
settings = load_settings(data_dir=data_dir, knowledge_bases_dir=data_dir / "kb-declarations", openai_api_key=None)
store = KnowledgeStore(settings.tools).open()
store.keyword_index("steps")
rows = []
for n in range(3):
    steps, cpu = {}, time.process_time()
    def step(name, fn):
        t = time.perf_counter()
        out = fn()
        steps[name] = round(time.perf_counter() - t, 3)
        return out
    name, digest = f"published-{n}.txt", f"published-{n}-{time.time_ns()}"
    step("recover_s", lambda: store.recover("steps"))
    (pending,) = step("begin_s", lambda: store.registry.begin_versions("steps", [(name, digest)]))
    chunks = [StoredChunk(chunk_id_for("steps", name, pending.version, i), "steps", name, pending.version, i,
                          "Published", "", f"newly published text part {i} term{n}") for i in range(3)]
    collection = store.require_kb("steps").collection
    step("chroma_add_s", lambda: store.vector_store("steps", collection).add(
        [chunk_to_node(c, [0.1, 0.2, 0.3, 0.4]) for c in chunks]))
    step("flip_s", lambda: store.registry.publish_versions([(pending, digest, 3, None, None)], collection=collection))
    index = step("keyword_s", lambda: store.rebuild_keyword_index("steps"))
    assert f"steps/{name}@v{pending.version}#2" in index.position, "the published chunks are not in the index"
    steps["total_s"] = round(sum(steps.values()), 3)
    steps["cpu_s"] = round(time.process_time() - cpu, 3)
    rows.append(steps)
store.close()
import tools.store
print(json.dumps([{**row, "code": str(Path(tools.store.__file__).parents[1])} for row in rows]), flush=True)
"""


def _run(code: str, checkout: str, *args: str) -> str:
    """Run `code` on the checkout's code: PYTHONPATH and the working directory both point at it (`python -c` puts
    the working directory first on sys.path, ahead of PYTHONPATH)."""
    root = str(Path(checkout).resolve())
    env = {**os.environ, "PYTHONPATH": root}
    command = [sys.executable, "-c", code, *args]
    done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {done.stderr[-1500:]}")
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--variant", action="append", required=True, help="LABEL=CHECKOUT (two or more)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, required=True, help="a scratch directory (templates and copies)")
    args = parser.parse_args()
    variants = [v.split("=", 1) for v in args.variant]
    for size in [int(s) for s in args.sizes.split(",")]:
        template = args.work / f"template-{size}"
        if not (template / "done").is_file():
            shutil.rmtree(template, ignore_errors=True)
            t = time.perf_counter()
            _run(SETUP, variants[0][1], str(template.resolve()), str(size))
            (template / "done").write_text("", encoding="utf-8")
            print(json.dumps({"size": size, "template_s": round(time.perf_counter() - t, 1)}), flush=True)
        for round_number in range(1, args.rounds + 1):
            for label, checkout in variants:
                copy = args.work / f"run-{size}-{label}"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(template, copy)
                load = os.getloadavg()[0]
                publishes = json.loads(_run(CHILD, checkout, str(copy.resolve())).strip().splitlines()[-1])
                for n, row in enumerate(publishes, 1):
                    print(json.dumps({"size": size, "round": round_number, "variant": label, "load": round(load, 1),
                                      "publish": n, **row}), flush=True)  # fmt: skip
                shutil.rmtree(copy, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
