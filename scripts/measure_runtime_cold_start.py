"""Cold start per local runtime: a fresh `kbbot ask` process, start to answer, and its peak RSS.

    .venv/bin/python scripts/measure_runtime_cold_start.py [--rounds 2] [--data-dir DIR]

The repo's sample KBs are synced once into DIR (default: a temp dir); then each round runs one
`kbbot ask --json` process per runtime, interleaved (torch, onnx, onnx-int8, torch, ...), and reports
the wall time of the whole process, its peak RSS, and whether torch was imported in it. Set
KBBOT_MODEL_CACHE_DIR to a cache that holds the ONNX exports already, or the first onnx run exports. int8 has its
own embedding identity, so it is asked against a KB it cannot use: its process still loads its model
(the question is refused with the reindex message), which is what its cold start costs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHILD = """
import json, resource, sys
from bot.cli import main
code = main(["ask", "How do I set up the VPN?", "--json"])
print(json.dumps({"code": code, "torch": "torch" in sys.modules,
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}), file=sys.stderr)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--runtimes", default="torch,onnx")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="kbbot-cold-"))
    env = dict(os.environ, KBBOT_DATA_DIR=str(data_dir), PYTHONPATH=str(REPO), TOKENIZERS_PARALLELISM="false")
    subprocess.run([sys.executable, "-m", "bot.cli", "kb", "sync"], env=env, cwd=REPO, check=True, capture_output=True)
    results: dict[str, list[dict]] = {r: [] for r in args.runtimes.split(",")}
    for _ in range(args.rounds):
        for runtime in results:
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", CHILD],
                env=dict(env, KBBOT_LOCAL_RUNTIME=runtime),
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            seconds = round(time.perf_counter() - started, 2)
            report = json.loads(done.stderr.strip().splitlines()[-1])
            results[runtime].append({"seconds": seconds, **report})
    print(json.dumps({"loadavg_after": os.getloadavg(), "runtimes": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
