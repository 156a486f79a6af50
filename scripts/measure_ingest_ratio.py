"""The `ingest` figures of `kbbot eval retrieval` alone: kbbot's uncached ingest of N documents of a BEIR dataset vs
sentence-transformers' bare torch encode, same run, interleaved — without building (or reusing) the dataset's whole
KB first, so a runtime whose KB is not built yet (e.g. KBBOT_LOCAL_RUNTIME=onnx-int8) is measured in minutes.

    KBBOT_DATA_DIR=DATA KBBOT_LOCAL_RUNTIME=onnx python scripts/measure_ingest_ratio.py --dataset scifact --sample 300
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.config import load_settings  # noqa: E402
from bot.eval.datasets import load_beir, resolve  # noqa: E402
from bot.eval.retrieval import measure_ingest  # noqa: E402
from bot.eval.workspace import EvalWorkspace  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--sample", type=int, default=300)
    args = parser.parse_args()
    settings = load_settings()
    ws = EvalWorkspace(settings, progress=False)
    result = measure_ingest(ws, load_beir(resolve(args.dataset)), args.sample)
    result["runtime"] = settings.tools.local_runtime
    result["uptime_load"] = os.getloadavg()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
