"""How long the knowledge-gaps query takes (what App Home and `kbbot report` wait for) over N recorded answers.

    python scripts/measure_gaps.py [--answers 10000] [--repeat 20]

Builds a records database in a temporary directory through the same `Records` calls the bot makes (a third of
the answers refused, every seventh disliked by one of five people, four KBs, 200 distinct questions), then times
reading and grouping the gaps of two KBs over 30 days.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.agent.models import Answer, Citation, Route  # noqa: E402
from bot.core import Origin  # noqa: E402
from bot.core.gaps import merge_gaps  # noqa: E402
from bot.core.records import Records  # noqa: E402

KBS = ["people", "engineering", "product", "finance"]


def build(records: Records, n: int) -> None:
    origin = Origin.slack_channel("C0PEOPLE01", "U0EMPLOY01")
    ids = []
    for i in range(n):
        kb, refused = KBS[i % 4], i % 3 == 0
        question = f"where is topic {i % 200} of {kb}?"
        citations = [] if refused else [Citation(1, kb, "doc.md", f"{kb}/doc.md@v1#0", "…", 0.5, "doc.md")]
        answer = Answer(
            "insufficient_context" if refused else "answered",
            "…",
            question,
            question,
            Route([kb], {kb: 0.5}),
            [],
            citations,
            {},
            searched_kbs=[kb],
        )
        ids.append(records.log_answer(origin, answer))
    for i in range(1, n, 7):
        records.log_feedback(ids[i], "bad", Origin.slack_channel("C0PEOPLE01", f"U{i % 5}"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        records = Records(Path(tmp) / "records.sqlite3")
        started = time.perf_counter()
        build(records, args.answers)
        print(f"recorded {args.answers} answers in {time.perf_counter() - started:.1f} s")
        kbs, since = ["people", "engineering"], time.time() - 30 * 86400
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            gaps, total = merge_gaps(
                records.gap_rows(kbs, since), records.gap_comments(kbs, since), lambda s: True, kbs, 20
            )
            times.append(1000 * (time.perf_counter() - started))
        p50, worst = statistics.median(times), max(times)
        print(f"gaps of 2 KBs over 30 days: {total} gaps; p50 {p50:.1f} ms, max {worst:.1f} ms")
        print("plan:", " | ".join(records.explain_gaps_query(kbs, since)))


if __name__ == "__main__":
    main()
