"""Which grading rule refuses each company case, and what its evidence's answer units look like.

    KBBOT_DATA_DIR=DIR python scripts/measure_refusal_causes.py --split dev --out F.jsonl [--dump D.jsonl]

Runs `kbbot eval company` with the offline grade observed (nothing it decides is changed) and writes one JSON line
per case: the dump's row, plus `graded`, each grading round's query, reason, the best chunks (cosine, coverage,
document, heading, text) and every answer unit of them (`grading.unit_matches`: cosine, coverage, typed, chunk
rank, text). Then prints, for every in-KB case refused although its evidence holds the expected fact (the case's
`fact` regex in one unit of the expected KB), the rule that refused it and the fact's unit, beside the refused
out-of-KB cases of the same rule: what a rule change must keep refused.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from measure_unit_recall import rows_with  # noqa: E402 - the sibling script (its folder is on the path)

UNITS_KEPT = 40  # per round, best cosine first: enough to hold the fact's unit in five chunks


def observed_run(split: str, dump: Path) -> list[dict]:
    import bot.eval.company as company
    from bot.agent import grading
    from bot.eval.workspace import EvalWorkspace

    current: list[dict] = []
    grade, ask = grading.grade_offline, company.ask

    def observed_grade(query, evidence, term_known, units=(), asked=""):
        verdict = grade(query, evidence, term_known, units, asked)
        current.append(
            {
                "query": query,
                "asked": asked,
                "sufficient": verdict.sufficient,
                "reason": verdict.reason,
                "score": verdict.score,
                "chunks": [
                    {
                        "rank": rank,
                        "kb": e.chunk.kb,
                        "document": e.chunk.document,
                        "cosine": round(float(e.cosine), 4),
                        "coverage": round(float(e.coverage), 4),
                        "header": e.chunk.header,
                        "text": e.chunk.text,
                    }
                    for rank, e in enumerate(evidence[: grading.UNIT_CHUNKS])
                ],
                "units": [
                    {
                        "rank": u.rank,
                        "cosine": round(u.cosine, 4),
                        "coverage": round(u.coverage, 4),
                        "typed": u.typed,
                        "text": u.text,
                    }
                    for u in list(units)[:UNITS_KEPT]
                ],
            }
        )
        return verdict

    records: list[list[dict]] = []

    def observed_ask(engine, text, turns):
        current.clear()
        reply = ask(engine, text, turns)
        records.append(list(current))
        return reply

    grading.grade_offline, company.ask = observed_grade, observed_ask
    try:
        company.eval_company(EvalWorkspace(progress=False), split=split, dump=dump)
    finally:
        grading.grade_offline, company.ask = grade, ask
    return rows_with(dump, records, "graded")


def rule_of(reason: str) -> str:
    """The rule a refusal's reason names, without its figures."""
    for prefix in (
        "the knowledge base never mentions",
        "the evidence found never mentions",
        "no sentence of the evidence names",
        "the evidence found gives no",
        "weak evidence",
        "no evidence names",
        "nothing relevant",
    ):
        if reason.startswith(prefix):
            return prefix
    return reason


def fact_units(row: dict, graded: dict) -> list[dict]:
    fact, kb = row["expected"].get("fact"), row["expected"].get("kb")
    if not fact:
        return []
    ranks = {c["rank"] for c in graded["chunks"] if c["kb"] == kb}
    return [u for u in graded["units"] if u["rank"] in ranks and re.search(fact, u["text"], re.IGNORECASE)]


def report(rows: list[dict]) -> None:
    refused = [r for r in rows if r["verdict"] == "refused_answerable"]
    ook_refused = [r for r in rows if r["verdict"] == "ook_refused"]
    print(f"refused answerable: {len(refused)}; out-of-KB refused: {len(ook_refused)}")
    print("rules refusing out-of-KB (first round):", Counter(rule_of(r["graded"][0]["reason"]) for r in ook_refused))
    for row in refused:
        first = row["graded"][0]
        held = [(i, u) for i, g in enumerate(row["graded"]) for u in fact_units(row, g)]
        print(f"\n{row['id']} [{row['kind']}] {row['standalone_query']!r}  fact /{row['expected']['fact']}/")
        print(f"  rule: {first['reason']}  (score {first['score']})")
        chunk = ", ".join(f"{c['cosine']:.2f}/{c['coverage']:.2f} {c['document']}" for c in first["chunks"])
        print(f"  chunks cos/cov: {chunk}")
        for i, u in enumerate(first["units"][:3]):
            shown = f"cos {u['cosine']:.2f} cov {u['coverage']:.2f} typed {u['typed']} r{u['rank']}"
            print(f"  top{i}: {shown}: {u['text'][:110]!r}")
        if held:
            position = first["units"].index(held[0][1]) if held[0][0] == 0 else None
            i, u = held[0]
            print(
                f"  FACT (round {i}, unit #{position}): cos {u['cosine']:.2f} cov {u['coverage']:.2f} "
                f"typed {u['typed']} r{u['rank']}: {u['text'][:140]!r}"
            )
        else:
            print("  FACT: not in any unit of the expected KB's best chunks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", default="dev")
    parser.add_argument("--out", type=Path, required=True, help="the observed rows, one JSON line per case")
    parser.add_argument("--dump", type=Path, help="the eval's own dump (default: a temporary file)")
    parser.add_argument("--read", action="store_true", help="report on --out as written, without running")
    args = parser.parse_args()
    if args.read:
        rows = [json.loads(line) for line in args.out.open(encoding="utf-8")]
    else:
        with tempfile.TemporaryDirectory() as scratch:
            rows = observed_run(args.split, args.dump or Path(scratch) / "company.jsonl")
        with args.out.open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    report(rows)


if __name__ == "__main__":
    main()
