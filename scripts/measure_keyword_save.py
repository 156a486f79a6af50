#!/usr/bin/env python
"""Serialising a keyword-index update's delta for saving: dataclasses.asdict (before) vs the fields as they are
(tools/keyword_index.py `_fields_of`, after), interleaved, same JSON. Synthetic terms; 110 per chunk.

    python scripts/measure_keyword_save.py
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import asdict

from tools.keyword_index import _Delta, _fields_of


def main() -> None:
    rng = random.Random(1)
    words = [f"term{i}" for i in range(20_000)]
    for chunks in (5_000, 50_000):
        delta = _Delta(
            [rng.choices(words, k=110) for _ in range(chunks)],
            [rng.choices(words, k=200) for _ in range(chunks // 2)],
            list(range(chunks)),
        )
        assert json.dumps(asdict(delta)) == json.dumps(_fields_of(delta))
        for round_number in (1, 2):
            for name, fields in (("asdict", asdict), ("fields", _fields_of)):
                t = time.perf_counter()
                json.dumps({"delta": fields(delta)})
                seconds = time.perf_counter() - t
                print(f"{chunks} chunks, round {round_number}, {name}: {seconds:.2f} s (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
