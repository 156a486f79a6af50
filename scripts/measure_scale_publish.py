#!/usr/bin/env python
"""Time publishing one document into an existing `kbbot eval scale` KB, per checkout, interleaved.

    .venv/bin/python scripts/measure_scale_publish.py /tmp/s-100k --variant main=/work/main --variant new=. --rounds 2
    .venv/bin/python scripts/measure_scale_publish.py /tmp/s-100k --variant main=/work/main@/tmp/copy-a \
        --variant new=.@/tmp/copy-b --rounds 2

DATA_DIR is a scale data dir (e.g. a COPY of .../eval/scale/embedded-100000: every run publishes two documents
into it); `LABEL=CHECKOUT@DIR` gives a variant a copy of its own (needed when the variants save the keyword index
in layouts the other does not read: it would rebuild it). Each variant runs in its own process with PYTHONPATH
set to its checkout (A, B, A, B…), opens the KB, asks one question (the indexes load), then publishes two
documents: the first pays for importing the chunker, the second is a publish in a warm process. Each publish
is reported in wall seconds and in the process's CPU seconds (they survive a loaded machine better). The load
average is printed with each row. This is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
from pathlib import Path
from bot.config import load_settings
from bot.core import KnowledgeBot, Origin
data_dir = Path(sys.argv[1])
request = json.loads((data_dir / "scale-request.json").read_text())
settings = load_settings(data_dir=data_dir, knowledge_bases_dir=data_dir / "kb-declarations", openai_api_key=None)
bot = KnowledgeBot(settings)
bot.ask(Origin.eval(["scale"]), request["queries"][0])
out = {}
for n in range(2):
    doc = (f"published-{time.time_ns()}", "A newly published document", request["publish"][2] + f" (run {n})")
    t, cpu = time.perf_counter(), time.process_time()
    report = bot.ingest_records(Origin.cli(), "scale", [doc])
    out[f"publish_{n + 1}_s"] = round(time.perf_counter() - t, 2)
    out[f"publish_{n + 1}_cpu_s"] = round(time.process_time() - cpu, 2)
    if not (report.ok and report.embedded_chunks > 0):
        raise SystemExit("the publish failed")
bot.close()
import tools.store
out["code"] = str(Path(tools.store.__file__).parents[1])
print(json.dumps(out), flush=True)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--variant", action="append", required=True, help="LABEL=CHECKOUT[@DATA_DIR] (two or more)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    variants = [v.split("=", 1) for v in args.variant]
    for round_number in range(1, args.rounds + 1):
        for label, spec in variants:
            checkout, _, own_dir = spec.partition("@")
            data_dir = Path(own_dir) if own_dir else args.data_dir
            # PYTHONPATH and the working directory both the checkout: `python -c` puts the working directory first
            # on sys.path, so with PYTHONPATH alone every variant ran the code of the directory it was started in.
            root = str(Path(checkout).resolve())
            env = {**os.environ, "PYTHONPATH": root}
            load = os.getloadavg()[0]
            command = [sys.executable, "-c", CHILD, str(data_dir.resolve())]
            done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"{label}: failed ({done.returncode}): {done.stderr[-500:]}", file=sys.stderr)
                return 1
            row = {"round": round_number, "variant": label, "load": round(load, 1), **json.loads(done.stdout)}
            print(json.dumps(row), flush=True)
            time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
