#!/usr/bin/env python
"""Chunks re-read by keyword-index rebuilds over a `kbbot eval scale` build of 1M chunks: ingest calls of a
fixed 20,000 documents (before) vs calls that double the KB (bot/eval/scale.py, `_batch_documents`).

The rule (tools/keyword_index.py): each ingest call ends with an update of the keyword index; once the delta
passes max(5,000, 10 % of the base) it is a rebuild that reads, tokenizes and indexes every live chunk. The
pool and chunks per recombined document are those of the 100k build (docs/benchmarks.md, Scale).

    python scripts/scale_rebuild_work.py [--size 1000000]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

POOL_DOCUMENTS, POOL_CHUNKS, CHUNKS_PER_VARIANT = 9604, 19860, 2.04


def rebuild_work(size: int, batch_documents: Callable[[int], int]) -> tuple[int, int]:
    """(ingest calls, chunks re-read by rebuilds) of a build to `size` chunks."""
    chunks, documents, base, delta = POOL_CHUNKS, POOL_DOCUMENTS, POOL_CHUNKS, 0
    reread, calls = POOL_CHUNKS, 1
    while chunks < size:
        added = min(int(batch_documents(documents) * CHUNKS_PER_VARIANT), size - chunks)
        chunks += added
        documents += int(added / CHUNKS_PER_VARIANT)
        calls += 1
        if delta + added > max(5000, 0.1 * base):
            base, delta, reread = chunks, 0, reread + chunks
        else:
            delta += added
    return calls, reread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    size = parser.parse_args().size
    for name, schedule in (("fixed 20,000 documents", lambda _: 20_000), ("doubling", lambda d: max(20_000, d))):
        calls, reread = rebuild_work(size, schedule)
        print(f"{name}: {calls} ingest calls, {reread:,} chunks re-read by keyword-index rebuilds")


if __name__ == "__main__":
    main()
