#!/usr/bin/env python
"""`kbbot eval scale`'s serving measurements on an existing scale KB, with the in-memory snapshot limit set.

    .venv/bin/python scripts/measure_scale_serving.py COPY_OF_embedded-100000 --snapshot-max-chunks 50000

With a limit below the KB's size, dense search goes through Chroma's HNSW index as it does for a 1M KB
(tools/search.py, SNAPSHOT_MAX_CHUNKS), so a 100k KB shows what that path costs. Runs the measuring child's
code (bot.eval.scale._serve: cold start, 40 warm searches and asks, peak RSS, publishing one document, which
goes into DATA_DIR: use a copy) in this process and prints its JSON. This is a measurement, not a test.
"""

from __future__ import annotations

import time

SPAWNED = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--snapshot-max-chunks", type=int, required=True)
    args = parser.parse_args()
    import tools.search

    tools.search.SNAPSHOT_MAX_CHUNKS = args.snapshot_max_chunks
    from bot.eval import scale

    request = json.loads((args.data_dir / "scale-request.json").read_text(encoding="utf-8"))
    request["data_dir"] = str(args.data_dir.resolve())
    request["publish"][0] = f"published-{int(time.time())}"
    path = args.data_dir / "scale-request-serving.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    print(json.dumps({"snapshot_max_chunks": args.snapshot_max_chunks, **scale._serve(path, SPAWNED)}))


if __name__ == "__main__":
    main()
