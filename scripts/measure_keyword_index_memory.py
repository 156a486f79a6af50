"""What a saved keyword index costs a process: load time, resident memory, and the first searches.

    .venv/bin/python scripts/measure_keyword_index_memory.py DATA_DIR/keyword/KB/gN [--cold] [--queries Q ...]

Loads one saved generation (tools/keyword_index.py) in this bare process and prints, as JSON, the load time, the
process's anonymous and file-backed resident memory after a `gc.collect()` (the memory-mapped base shows as
file-backed once queries touch it), its peak, and the time of a first and of the next searches. `--cold` drops the
page cache first (root only: `echo 1 > /proc/sys/vm/drop_caches`), for a first start after a reboot.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import time
from pathlib import Path

QUERIES = (
    "what is the effect of vitamin d on bone density",
    "aircraft wing boundary layer heat transfer",
    "library information retrieval indexing",
    "gene expression in cancer cells",
    "pressure distribution on a cone",
)


def _memory_mb() -> dict[str, float]:
    with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status)
    return {key: round(int(fields[key].split()[0]) / 1024, 1) for key in ("RssAnon", "RssFile", "VmHWM")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("generation", type=Path)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--queries", nargs="+", default=list(QUERIES))
    args = parser.parse_args()
    if args.cold:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("1\n", encoding="ascii")
    from tools.keyword_index import KeywordIndex

    started = time.perf_counter()
    index = KeywordIndex.load(args.generation)
    if index is None:
        raise SystemExit(f"no keyword index of the current format in {args.generation}")
    load_s = time.perf_counter() - started
    gc.collect()
    after_load = _memory_mb()
    started = time.perf_counter()
    index.search(args.queries[0], 10)
    first_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    for query in args.queries[1:]:
        index.search(query, 10)
    rest_ms = (time.perf_counter() - started) * 1000 / max(1, len(args.queries) - 1)
    print(
        json.dumps(
            {
                "chunks": len(index.chunk_ids),
                "delta_chunks": index.delta_size,
                "load_s": round(load_s, 2),
                "after_load_mb": after_load,
                "first_search_ms": round(first_ms, 1),
                "next_search_mean_ms": round(rest_ms, 1),
                "after_searches_mb": _memory_mb(),
            }
        )
    )


if __name__ == "__main__":
    main()
