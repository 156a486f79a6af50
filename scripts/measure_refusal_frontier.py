"""How far the offline refusal decision can take the company benchmark: the ceiling and the trade-off.

    KBBOT_DATA_DIR=DIR .venv/bin/python scripts/measure_refusal_frontier.py --split dev|test [--dump F.jsonl] [--json]

Runs `kbbot eval company` with every offline grading verdict forced to "sufficient" (the rules' own decision
is kept, in the round's reason), so each question is answered from its first round's evidence. Reported per
language:

- the **ceiling**: the share of in-KB questions whose forced answer is right (the fact in the answer, the
  right document cited first) — what a perfect refusal rule could reach with today's retrieval and answer
  composition, since refusing never makes an answer right;
- what the rules keep of those, and how many out-of-KB questions they refuse at the first round;
- for English, the **frontier** of the fitted sufficiency score (bot/agent/sufficiency.py, which decides
  nothing yet): for each out-of-KB refusal goal, the most of the right answers one score threshold keeps, and
  the in-KB answered-right share that implies.

The forced run is an approximation of the engine (a refused first round would try up to two more), and the
score was fitted on company dev among others, so dev's frontier is optimistic and test's is held out.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

RULES_ANSWER, RULES_REFUSE = "rules: answer; ", "rules: refuse; "
OOK_GOALS = (0.8, 0.9, 0.95, 0.97)


@contextlib.contextmanager
def refusals_off():
    """Every offline grading verdict with evidence made "sufficient", the rules' own decision kept in its reason."""
    from bot.agent import grading

    grade = grading.grade_offline

    def always_sufficient(query, evidence, *args, **kwargs):
        verdict = grade(query, evidence, *args, **kwargs)
        if not evidence:
            return verdict
        said = RULES_ANSWER if verdict.sufficient else RULES_REFUSE
        return dataclasses.replace(verdict, sufficient=True, reason=said + verdict.reason)

    grading.grade_offline = always_sufficient  # the engine reads it from the module at each grading step
    try:
        yield
    finally:
        grading.grade_offline = grade


def forced_answers(split: str, dump: Path) -> list[dict]:
    from bot.eval.company import eval_company
    from bot.eval.workspace import EvalWorkspace

    with refusals_off():
        eval_company(EvalWorkspace(progress=False), split=split, dump=dump)
    return [json.loads(line) for line in dump.open(encoding="utf-8")]


def summary(rows: list[dict]) -> dict:
    out: dict = {}
    for lang in sorted({r["lang"] for r in rows}):
        of_lang = [r for r in rows if r["lang"] == lang]
        in_kb = [r for r in of_lang if not r["kind"].startswith("ook")]
        ook = [r for r in of_lang if r["kind"].startswith("ook")]
        right = [r for r in in_kb if r["verdict"] == "answered_right"]
        follow_ups = [r for r in in_kb if r["kind"] == "follow-up"]
        entry = {
            "in_kb": len(in_kb),
            "ceiling": round(len(right) / max(1, len(in_kb)), 4),
            "follow_up_ceiling": round(
                sum(r["verdict"] == "answered_right" for r in follow_ups) / max(1, len(follow_ups)), 4
            ),
            "rules_keep_right": sum(_rules_answered(r) for r in right),
            "out_of_kb": len(ook),
            "rules_refuse_ook_first_round": sum(not _rules_answered(r) for r in ook),
        }
        scored_right = [s for s in (_score(r) for r in right) if s is not None]
        scored_ook = [s for s in (_score(r) for r in ook) if s is not None]
        if scored_right and scored_ook:
            entry["frontier"] = frontier(scored_right, scored_ook, len(in_kb))
        out[lang] = entry
    return out


def _rules_answered(row: dict) -> bool:
    """Whether the rules themselves answered the first round (a round with no evidence was never forced)."""
    return bool(row["rounds"]) and row["rounds"][0]["reason"].startswith(RULES_ANSWER)


def _score(row: dict) -> float | None:
    record = row["rounds"][0].get("sufficiency") if row["rounds"] else None
    return record.get("score") if isinstance(record, dict) else record


def frontier(right: list[float], ook: list[float], in_kb: int) -> dict:
    """Per refusal goal: the best threshold's share of right answers kept, and the in-KB right it implies."""
    best: dict[str, dict] = {}
    for threshold in sorted(set(right) | set(ook)):
        kept = sum(s >= threshold for s in right)
        refused = sum(s < threshold for s in ook) / len(ook)
        for goal in OOK_GOALS:
            key = f"ook_refused>={goal}"
            if refused >= goal and kept > best.get(key, {}).get("right_kept", -1):
                best[key] = {
                    "threshold": threshold,
                    "right_kept": kept,
                    "share_of_ceiling": round(kept / len(right), 4),
                    "in_kb_right": round(kept / in_kb, 4),
                }
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--dump", type=Path, help="the forced run's per-case dump (default: a temporary file)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        rows = forced_answers(args.split, args.dump or Path(scratch) / "forced.jsonl")
    result = {"split": args.split, **summary(rows)}
    print(json.dumps(result, indent=None if args.json else 1))


if __name__ == "__main__":
    main()
