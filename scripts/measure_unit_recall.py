"""Where the company benchmark's in-KB misses lose their fact: retrieval, the answer step's cut, or the pick.

    KBBOT_DATA_DIR=DIR python scripts/measure_unit_recall.py --split dev [--forced] [--dump F] [--json] [--list]

Runs `kbbot eval company` with the engine's grading and answering steps observed (nothing they decide is
changed) and sorts every in-KB case that is not answered right by where its expected fact (the case's `fact`
regex) is, in the evidence of the round that answered (or, for a refusal, the first round):

- (a) in no evidence chunk of the expected KB: retrieval or routing never brought it;
- (b) retrieved, but in no chunk the answer step reads (`answering.select_evidence`, MAX_EVIDENCE_CHUNKS);
- (c) in a chunk the answer step was given, but another unit was picked (or, refused: the rules refused).

`--forced` answers every first round, as scripts/measure_refusal_frontier.py does (every offline grading verdict
"sufficient"): where the misses of the refusal ceiling lose their fact.

It also measures what ranking answer units across all the round's chunks would do: for each answered case,
the best unit support (cosine × coverage of the question's terms, as grading measures it: `unit_matches`) of
the chunks past the cut minus the best within it. A unit past the cut can only be admitted on its own match
where that margin separates the cases whose fact lies past the cut from those it would displace.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from measure_refusal_frontier import refusals_off  # noqa: E402 - the sibling script (its folder is on the path)

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def observed_run(split: str, dump: Path, forced: bool = False) -> list[dict]:
    """The company run's dump rows, each with `observed`: its rounds' evidence and the answer step's chunks."""
    import bot.eval.company as company
    from bot.agent import answering, grading
    from bot.agent.engine import AnswerEngine
    from bot.eval.workspace import EvalWorkspace

    current: dict = {}
    grade, write_answer, ask = AnswerEngine.grade, AnswerEngine.write_answer, company.ask

    def observed_grade(self, query, evidence, kbs, llm, asked=""):
        outcome = grade(self, query, evidence, kbs, llm, asked=asked)
        chunks = [
            {
                "id": e.chunk_id,
                "kb": e.chunk.kb,
                "document": e.chunk.document,
                "text": f"{e.chunk.location}\n{e.chunk.text}",
            }
            for e in evidence
        ]
        current.setdefault("rounds", []).append({"sufficient": outcome.value.sufficient, "evidence": chunks})
        return outcome

    def observed_write(self, question, evidence, relevant_ids, llm, routed=()):
        read = answering.select_evidence(evidence, relevant_ids)
        everything = answering.select_evidence(evidence, relevant_ids, limit=len(evidence))
        current["read"] = [e.chunk_id for e in read]
        embedder = self.service.embedder
        saved = self.service.store.unit_vectors(embedder.model_name, embedder.dimension, [e.chunk for e in everything])
        query_vector = embedder.embed_query(question.standalone)
        known = self.term_known(list(dict.fromkeys(e.chunk.kb for e in everything)))
        units = grading.unit_matches(
            question.standalone, everything, query_vector, saved, known, chunks=len(everything)
        )
        support = {}
        for unit in units:
            side = "within" if unit.rank < len(read) else "past"
            value = max(unit.cosine, 0.0) * unit.coverage
            if value > support.get(side, (-1.0, ""))[0]:
                support[side] = (value, unit.text)
        current["support"] = support
        return write_answer(self, question, evidence, relevant_ids, llm, routed=routed)

    records: list[dict] = []

    def observed_ask(engine, text, turns):
        current.clear()
        reply = ask(engine, text, turns)
        records.append(dict(current))
        return reply

    AnswerEngine.grade, AnswerEngine.write_answer, company.ask = observed_grade, observed_write, observed_ask
    try:
        with refusals_off() if forced else contextlib.nullcontext():
            company.eval_company(EvalWorkspace(progress=False), split=split, dump=dump)
    finally:
        AnswerEngine.grade, AnswerEngine.write_answer, company.ask = grade, write_answer, ask
    return rows_with(dump, records, "observed")


def rows_with(dump: Path, records: list[dict], key: str) -> list[dict]:
    """The dump's rows, each with what was recorded while its question (its last ask) was asked, under `key`."""
    rows = [json.loads(line) for line in dump.open(encoding="utf-8")]
    asked = iter(records)
    for row in rows:  # a case asks its history's user turns first, then its question
        for _ in range(len(row["history"]) // 2):
            next(asked)
        row[key] = next(asked)
    return rows


def where_lost(row: dict) -> str:
    """a / b / c / refused (see the module docstring)."""
    expected, observed = row["expected"], row["observed"]
    rounds = observed.get("rounds", [])
    answering_round = next((r for r in rounds if r["sufficient"]), None)
    round_ = answering_round or (rounds[0] if rounds else None)
    if round_ is None:
        return "a"
    holding = [
        e["id"]
        for e in round_["evidence"]
        if e["kb"] == expected["kb"] and re.search(expected["fact"], e["text"], re.IGNORECASE)
    ]
    if not holding:
        return "a"
    if answering_round is None:
        return "refused"
    return "c" if set(holding) & set(observed.get("read", [])) else "b"


def summary(rows: list[dict]) -> dict:
    misses = [r for r in rows if r["verdict"] in ("answered_wrong", "refused_answerable")]
    classes = Counter((r["verdict"], where_lost(r)) for r in misses)
    margins = []
    for row in rows:
        support = row["observed"].get("support", {})
        if "within" in support and "past" in support and row["expected"].get("fact"):
            fact_past = bool(re.search(row["expected"]["fact"], support["past"][1], re.IGNORECASE))
            margins.append((round(support["past"][0] - support["within"][0], 4), row["verdict"], fact_past, row["id"]))
    margins.sort(reverse=True)
    return {
        "misses": {f"{verdict} ({where})": n for (verdict, where), n in sorted(classes.items())},
        "lost_past_the_cut": [r["id"] for r in misses if where_lost(r) == "b"],
        "best_past_minus_within_support": {
            "highest": margins[:5],
            "where_the_fact_is_past_the_cut": [m for m in margins if m[2]],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--dump", type=Path, help="the run's per-case dump (default: a temporary file)")
    parser.add_argument("--forced", action="store_true", help="answer every first round (refusals off)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--list", action="store_true", help="also list each miss with its class")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        rows = observed_run(args.split, args.dump or Path(scratch) / "observed.jsonl", args.forced)
    in_kb = [r for r in rows if not r["kind"].startswith("ook")]
    right = sum(r["verdict"] == "answered_right" for r in in_kb)
    result = {"split": args.split, "forced": args.forced, "in_kb_right": f"{right}/{len(in_kb)}", **summary(rows)}
    if args.list:
        result["cases"] = [
            (r["id"], r["verdict"], where_lost(r))
            for r in rows
            if r["verdict"] in ("answered_wrong", "refused_answerable")
        ]
    print(json.dumps(result, indent=None if args.json else 1, ensure_ascii=False))


if __name__ == "__main__":
    main()
