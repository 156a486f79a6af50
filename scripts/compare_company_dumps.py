"""Two `kbbot eval company --dump` files side by side: verdict counts and every case whose verdict moved.

    python scripts/compare_company_dumps.py BEFORE.jsonl AFTER.jsonl [--new-file benchmarks/company/questions/F.jsonl]

With --new-file, the cases of that question file are counted apart from the rest (a held-out set written for dev).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def load(path: Path) -> dict[str, dict]:
    return {row["id"]: row for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--new-file", type=Path)
    args = parser.parse_args()
    before, after = load(args.before), load(args.after)
    new = set()
    if args.new_file:
        new = {json.loads(line)["id"] for line in args.new_file.read_text(encoding="utf-8").splitlines()}
    groups = {"other cases": lambda i: i not in new, "new file": lambda i: i in new} if new else {"all": bool}
    for name, keep in groups.items():
        for label, dump in (("before", before), ("after", after)):
            ids = [i for i in dump if keep(i)]
            verdicts = Counter(dump[i]["verdict"] for i in ids)
            multi = Counter(dump[i]["verdict"] for i in ids if dump[i]["kind"] == "multi-fact")
            print(f"{name:12} {label:6} {dict(sorted(verdicts.items()))}  multi-fact {dict(sorted(multi.items()))}")
    for i, row in before.items():
        if i in after and row["verdict"] != after[i]["verdict"]:
            print(f"moved  {i} ({row['kind']}): {row['verdict']} -> {after[i]['verdict']}")
    reworded = [i for i, row in before.items() if i in after and row["verdict"] == after[i]["verdict"]]
    reworded = [i for i in reworded if before[i]["answer"] != after[i]["answer"]]
    print(f"answer text changed, verdict not: {len(reworded)} {reworded}")


if __name__ == "__main__":
    main()
