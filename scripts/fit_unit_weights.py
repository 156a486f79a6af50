"""Do jointly fitted weights choose the fact's answer unit more often than the hand-set ones? (issue #13 Build 3)

    KBBOT_DATA_DIR=... .venv/bin/python scripts/fit_unit_weights.py capture --split dev --out units-dev.pkl
    .venv/bin/python scripts/fit_unit_weights.py fit units-dev.pkl [--folds 5] [--json figures.json]

`capture` asks every in-KB case of the company benchmark (threads included: their history is asked first, as
`kbbot eval company` does) and records what the engine really hands to the answer step for the case's own
question — the call to `answering.extractive_answer` made by bot/agent/engine.py — with, for every answer unit
of that evidence, the features `score_units` adds up (UnitFeatures), its cosine to the question (vectors saved at
ingest, else encoded) and to each asked part, and whether it matches the case's `fact` regex.

`fit` replays the answer step from those records (the lexical score as a dot product of weights and features,
the SEMANTIC_CANDIDATES head re-scored by meaning, then the real `compose`) — checked first to give exactly the
engine's answer with the hand weights — and measures, for hand and for fitted weights:

- hit@1: the lead unit (the answer's first quoted unit) matches the fact;
- hit@3: one of the three best-scored units does;
- answer: the composed answer's text matches the fact and cites the expected document first.

Fitting is cross-validated by case (5 folds over dev, the held-out files out of every fold); the held-out files
(tables-2, threads-3, multi-part-2: written by other engineers this week) are scored with weights fitted on all
the rest. Two fits: a pairwise logistic ranker over the same features (sklearn; its weights rescaled so the
meaning weight stays 1.0), and coordinate ascent from the hand weights on the replayed hit@1 of the training
cases (listwise, the metric itself).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HELD_OUT = ("tables-2.jsonl", "threads-3.jsonl", "multi-part-2.jsonl")
# The flags score_units records, in the order it applies them (the replay adds them in this order).
FLAGS = (
    "anchor",
    "focus",
    "disclaimed",
    "answer_type",
    "amount_range",
    "allowance",
    "first_step",
    "fragment",
    "syntax",
    "header_row",
    "cjk_defer",
    "row_key",
    "already_said",
    "no_consequence",
    "next_step",
    "before_said",
)
NAMES = ("overlap", "rank_prior", "position", "phrase", *FLAGS, "meaning")


# The hand-set weights (main at fdc0ba6, before this fit), as score_units applied them.
HAND = {
    "overlap": 0.5,
    "rank_prior": 0.05,
    "position": -0.005,
    "phrase": 0.15,
    "anchor": -0.3,
    "focus": -0.3,
    "disclaimed": -0.3,
    "answer_type": 0.25,
    "amount_range": 0.25,
    "allowance": 0.1,
    "first_step": 0.25,
    "fragment": -0.2,
    "syntax": -0.4,
    "header_row": -0.2,
    "cjk_defer": -0.2,
    "row_key": 0.05,
    "already_said": -0.3,
    "no_consequence": -0.15,
    "next_step": 0.2,
    "before_said": -0.15,
    "meaning": 1.0,
}


def hand_weights() -> dict[str, float]:
    return dict(HAND)


def engine_weights() -> dict[str, float]:
    """The weights bot/agent/answering.py applies now."""
    from bot.agent import answering as a

    return {
        "overlap": a.LEXICAL_WEIGHT,
        "rank_prior": a.RANK_PRIOR,
        "position": -a.POSITION_STEP,
        "phrase": a.PHRASE_WEIGHT,
        "anchor": -a.ANCHOR_PENALTY,
        "focus": -a.FOCUS_PENALTY,
        "disclaimed": -a.DISCLAIMED_PENALTY,
        "answer_type": a.ANSWER_TYPE_BONUS,
        "amount_range": a.AMOUNT_RANGE_BONUS,
        "allowance": a.ALLOWANCE_BONUS,
        "first_step": a.FIRST_STEP_BONUS,
        "fragment": -a.FRAGMENT_PENALTY,
        "syntax": -a.SYNTAX_PENALTY,
        "header_row": -a.HEADER_ROW_PENALTY,
        "cjk_defer": -a.CJK_DEFER_PENALTY,
        "row_key": a.ROW_KEY_BONUS,
        "already_said": -a.ALREADY_SAID_PENALTY,
        "no_consequence": -a.NOT_WHAT_NEXT_PENALTY,
        "next_step": a.NEXT_STEP_BONUS,
        "before_said": -a.BEFORE_SAID_PENALTY,
        "meaning": a.MEANING_WEIGHT,
    }


@dataclass
class Record:
    """One case's answer step, as the engine called it, and its units' features."""

    id: str
    file: str
    kind: str
    fact: str
    documents: list[str]
    query: str
    evidence: list
    kwargs: dict  # extractive_answer's other arguments, embed left out
    draft: str | None  # the engine's answer text
    features: list  # UnitFeatures, in the evidence's order
    cosine: np.ndarray  # each unit's cosine to the query (nan: no vector)
    part_cosine: np.ndarray | None  # units × asked parts
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))


# --- capture ------------------------------------------------------------------------------------------------


def capture(args: argparse.Namespace) -> None:
    from bot.agent import answering
    from bot.config import load_settings
    from bot.core import Turn
    from bot.eval.company import QUESTIONS_DIR, build_kbs, is_out_of_kb, load_cases, select
    from bot.eval.engine import ScopedBot, ask
    from bot.eval.workspace import EvalWorkspace
    from tools.text import answer_units

    ws = EvalWorkspace(load_settings(), None, progress=False)
    cases = [c for c in select(load_cases(args.questions or QUESTIONS_DIR), args.split) if not is_out_of_kb(c)]
    build_kbs(ws)
    engine = ScopedBot(ws.bot, frozenset(("people", "engineering", "finance", "product")))
    engine.answer("warm-up: what is in the knowledge base?")
    original = answering.extractive_answer
    calls: list[tuple[tuple, dict, object]] = []

    def recording(*a, **kw):
        draft = original(*a, **kw)
        calls.append((a, kw, draft))
        return draft

    answering.extractive_answer = recording
    records = []
    for number, case in enumerate(cases, 1):
        turns: list = []
        for earlier in case["history"]:
            reply = ask(engine, earlier, turns)
            turns += [Turn("user", earlier), Turn("assistant", reply.answer)]
        calls.clear()
        asked = ask(engine, case["question"], turns)
        if not calls:
            continue  # refused before the answer step: no weight can change it
        (query, evidence, query_vector, embed), kw, draft = calls[-1][0], calls[-1][1], calls[-1][2]
        features: list = []
        answering.score_units(
            query,
            evidence,
            query_vector,
            embed,
            kw.get("focus", frozenset()),
            kw.get("unit_vectors"),
            kw.get("asked"),
            kw.get("avoid", ()),
            kw.get("next_step", ""),
            features=features,
        )
        saved = {}
        for rank, item in enumerate(evidence):
            vectors = (kw.get("unit_vectors") or {}).get(item.chunk_id)
            if vectors is not None and len(vectors) == len(answer_units(item.chunk.text)):
                saved[rank] = vectors
        units = [(f.rank, f.position, answer_units(evidence[f.rank].chunk.text)[f.position].text) for f in features]
        vectors = answering._meaning_vectors(units, saved, embed)
        cosine = vectors @ query_vector if vectors is not None else np.full(len(units), np.nan)
        parts = answering.asked_parts(kw.get("asked") or query)
        part_cosine = None
        if len(parts) >= 2 and vectors is not None:
            part_cosine = vectors @ np.asarray(embed([p.text for p in parts])).T
        documents = case["document"] if isinstance(case["document"], list) else [case["document"]]
        records.append(
            Record(
                case["id"],
                case["file"],
                case["kind"],
                case["fact"],
                documents,
                query,
                list(evidence),
                {k: v for k, v in kw.items()},
                draft.text if draft else None,
                features,
                cosine,
                part_cosine,
            )
        )
        if asked.answer and draft and draft.text not in asked.answer:
            print(f"note: {case['id']}: the answer step's draft is not the final answer text", file=sys.stderr)
        if number % 50 == 0:
            print(f"{number}/{len(cases)}", file=sys.stderr, flush=True)
    answering.extractive_answer = original
    with open(args.out, "wb") as out:
        pickle.dump(records, out)
    print(f"{len(records)} of {len(cases)} in-KB cases reached the answer step; written to {args.out}")


# --- replay -------------------------------------------------------------------------------------------------


def lexical_scores(record: Record, w: dict[str, float]) -> list[float]:
    """score_units' lexical score with weights `w`, added in the engine's order (the hand weights give its
    scores bit for bit)."""
    scores = []
    for f in record.features:
        s = w["overlap"] * f.overlap + w["rank_prior"] / (1 + f.rank) + w["position"] * f.position
        s += w["phrase"] * f.phrase  # (0.0 when the question has no phrases: adding 0.0 changes nothing)
        for name in FLAGS:
            if name in f.flags:
                s += w[name]
        scores.append(s)
    return scores


def replay(record: Record, w: dict[str, float]):
    """The answer step with weights `w`: (scored candidates best first, composed units, answer text or None)."""
    from bot.agent import answering
    from bot.agent.answering import _Candidate
    from tools.text import has_cjk

    query, evidence, kw = record.query, record.evidence, record.kwargs
    asked = kw.get("asked")
    # The lexical candidates, with their terms (as score_units builds them), rescored.
    base = answering.score_units(
        query,
        evidence,
        None,
        None,
        kw.get("focus", frozenset()),
        kw.get("unit_vectors"),
        asked,
        kw.get("avoid", ()),
        kw.get("next_step", ""),
    )
    by_place = {(c.rank, c.position): c for c in base}
    index = {(f.rank, f.position): i for i, f in enumerate(record.features)}
    scores = lexical_scores(record, w)
    scored = [replace(by_place[(f.rank, f.position)], score=s) for f, s in zip(record.features, scores, strict=True)]
    if not np.isnan(record.cosine).all():
        scored.sort(key=lambda c: c.score, reverse=True)
        head: dict[tuple[int, str], _Candidate] = {}
        for c in scored:
            if len(head) == answering.SEMANTIC_CANDIDATES:
                break
            head.setdefault((c.rank, c.reads), c)
        parts = answering.asked_parts(asked or query)
        for part in parts:
            front = next((c for c in scored if part.terms & c.terms), None)
            if front is not None:
                head.setdefault((front.rank, front.reads), front)
        members = [c for c in scored if (c.rank, c.reads) in head]
        closest: dict[tuple[int, str], float] = {}
        by_part: dict[tuple[int, str], np.ndarray] = {}
        for c in members:
            i = index[(c.rank, c.position)]
            key = (c.rank, c.reads)
            closest[key] = max(float(record.cosine[i]), closest.get(key, -1.0))
            if record.part_cosine is not None and len(parts) >= 2:
                row = record.part_cosine[i]
                by_part[key] = np.maximum(by_part[key], row) if key in by_part else row
        meaning = answering.CJK_MEANING_WEIGHT * w["meaning"] if has_cjk(query) else w["meaning"]
        scored = [
            replace(
                c,
                score=c.score + meaning * closest[key],
                part_meaning=tuple(float(x) for x in by_part[key]) if key in by_part else (),
            )
            for key, c in head.items()
        ]
    scored.sort(key=lambda c: c.score, reverse=True)
    if not scored or scored[0].score <= answering.MIN_SENTENCE_SCORE:
        return scored, [], None
    parts = answering.asked_parts(asked or query)
    chosen = answering.compose(
        query, evidence, scored, kw.get("routed", ()), top_passage_first=not kw.get("avoid"), parts=parts
    )
    draft = answering._cited(evidence, chosen)
    missing = answering.unanswered(parts, evidence)
    text = draft.text
    if missing and len(missing) < len(parts):
        text = f"{text} {answering.missing_note(missing)}"
    return scored, chosen, (text, draft.citations)


def matches(record: Record, text: str) -> bool:
    return re.search(record.fact, text, re.IGNORECASE) is not None


def measure(record: Record, w: dict[str, float]) -> dict[str, int]:
    scored, chosen, answer = replay(record, w)
    hit1 = bool(chosen) and matches(record, chosen[0].reads)
    hit3 = any(matches(record, c.reads) for c in scored[:3])
    right = False
    if answer is not None:
        text, citations = answer
        right = matches(record, text) and bool(citations) and citations[0].document in record.documents
    return {"hit1": int(hit1), "hit3": int(hit3), "answer": int(right), "n": 1}


def total(records: list[Record], w: dict[str, float]) -> dict[str, int]:
    sums = {"hit1": 0, "hit3": 0, "answer": 0, "n": 0}
    for r in records:
        for k, v in measure(r, w).items():
            sums[k] += v
    return sums


# --- fast proxy (for fitting): the lead as the best final score, no compose ------------------------------


@dataclass
class Matrix:
    x: np.ndarray  # units × features (NAMES), meaning = the unit's cosine (× CJK weight), by its reads' best
    keys: list  # (rank, reads) per unit
    labels: np.ndarray
    order: np.ndarray  # the units in the evidence's order (for stable sorting)


def matrix(record: Record) -> Matrix:
    from bot.agent import answering
    from tools.text import has_cjk

    rows = []
    keys = []
    cos_by_key: dict[tuple[int, str], float] = {}
    for f, cos in zip(record.features, record.cosine, strict=True):
        key = (f.rank, f.reads)
        cos_by_key[key] = max(float(np.nan_to_num(cos)), cos_by_key.get(key, -1.0))
    factor = answering.CJK_MEANING_WEIGHT if has_cjk(record.query) else 1.0
    for f in record.features:
        key = (f.rank, f.reads)
        keys.append(key)
        rows.append(
            [f.overlap, 1.0 / (1 + f.rank), float(f.position), f.phrase]
            + [float(name in f.flags) for name in FLAGS]
            + [factor * cos_by_key[key]]
        )
    labels = np.array([matches(record, f.reads) for f in record.features], bool)
    return Matrix(np.array(rows), keys, labels, np.arange(len(rows)))


def proxy_hit1(m: Matrix, wv: np.ndarray, head_size: int) -> bool:
    lexical = m.x[:, :-1] @ wv[:-1]
    order = np.argsort(-lexical, kind="stable")
    seen: dict = {}
    for i in order:
        if len(seen) == head_size:
            break
        seen.setdefault(m.keys[i], i)
    best = max(seen.values(), key=lambda i: lexical[i] + wv[-1] * m.x[i, -1])
    return bool(m.labels[best])


def coordinate_ascent(mats: list[Matrix], start: dict[str, float], passes: int = 3) -> dict[str, float]:
    from bot.agent import answering

    head = answering.SEMANTIC_CANDIDATES
    wv = np.array([start[n] for n in NAMES], float)

    def objective(v: np.ndarray) -> int:
        return sum(proxy_hit1(m, v, head) for m in mats)

    best = objective(wv)
    multipliers = (0.0, 0.25, 0.5, 0.75, 1.5, 2.0, 3.0)
    for _ in range(passes):
        improved = False
        for j, name in enumerate(NAMES):
            if name == "meaning":
                continue  # the scale: fixed at the hand value
            current = wv[j]
            candidates = {current * k for k in multipliers} | {current + d for d in (-0.1, 0.1)}
            for value in sorted(candidates):
                trial = wv.copy()
                trial[j] = value
                got = objective(trial)
                if got > best:  # strictly better on the training cases only
                    best, wv, improved = got, trial, True
        if not improved:
            break
    return dict(zip(NAMES, (float(v) for v in wv), strict=True))


def pairwise_logistic(mats: list[Matrix], hand: dict[str, float], c: float, top: int = 20) -> dict[str, float]:
    """A RankNet-style linear ranker: logistic regression on (fact unit − other unit) feature differences among
    each case's `top` units by hand score; weights rescaled so `meaning` is the hand's 1.0."""
    from sklearn.linear_model import LogisticRegression

    d = pair_differences(mats, hand, top)
    if not len(d):
        return dict(hand)
    x = np.vstack([d, -d])
    y = np.r_[np.ones(len(d)), np.zeros(len(d))]
    scale = np.abs(x).max(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=c, fit_intercept=False, max_iter=5000)
    model.fit(x / scale, y)
    wv = model.coef_[0] / scale
    if wv[-1] <= 0:
        return dict(hand)
    wv = wv / wv[-1] * hand["meaning"]
    return dict(zip(NAMES, (float(v) for v in wv), strict=True))


def pair_differences(mats: list[Matrix], hand: dict[str, float], top: int = 20) -> np.ndarray:
    """(fact unit − other unit) feature differences among each case's `top` units by hand score."""
    hv = np.array([hand[n] for n in NAMES])
    diffs = []
    for m in mats:
        if not m.labels.any() or m.labels.all():
            continue
        keep = np.argsort(-(m.x @ hv), kind="stable")[:top]
        pos = [i for i in keep if m.labels[i]] or list(np.flatnonzero(m.labels))[:3]
        neg = [i for i in keep if not m.labels[i]]
        diffs += [m.x[i] - m.x[j] for i in pos for j in neg]
    return np.array(diffs)


def shrunk_to_hand(mats: list[Matrix], hand: dict[str, float], strength: float) -> dict[str, float]:
    """Pairwise logistic loss around the hand weights: first the temperature t that best fits them as they are,
    then w = hand + δ minimising mean log(1 + exp(−t·d·w)) + strength·|δ/hand|² (each change measured relative to
    its hand value, the meaning weight held at 1.0)."""
    from scipy.optimize import minimize, minimize_scalar

    hv = np.array([hand[n] for n in NAMES])
    d = pair_differences(mats, hand)
    if not len(d):
        return dict(hand)

    def loss(w: np.ndarray, t: float) -> float:
        return float(np.mean(np.logaddexp(0.0, -t * (d @ w))))

    t = minimize_scalar(lambda t: loss(hv, t), bounds=(0.1, 200.0), method="bounded").x
    free = np.array([n != "meaning" for n in NAMES])
    size = np.abs(hv)

    def objective(delta: np.ndarray) -> float:
        w = hv.copy()
        w[free] += delta
        return loss(w, t) + strength * float(np.sum((delta / size[free]) ** 2))

    delta = minimize(objective, np.zeros(free.sum()), method="L-BFGS-B").x
    w = hv.copy()
    w[free] += delta
    return dict(zip(NAMES, (float(v) for v in w), strict=True))


def fit(args: argparse.Namespace) -> None:
    with open(args.records, "rb") as handle:
        records: list[Record] = pickle.load(handle)
    hand = hand_weights()
    # The replay must be the engine: with the hand weights, the same answer text for every case.
    mismatched = [r.id for r in records if (lambda a: a[0] if a else None)(replay(r, hand)[2]) != r.draft]
    print(f"replay check: {len(records) - len(mismatched)} of {len(records)} answers reproduced exactly")
    if mismatched:
        print("  differ:", mismatched[:20])
    pool = [r for r in records if r.file not in HELD_OUT]
    held = [r for r in records if r.file in HELD_OUT]
    mats = {r.id: matrix(r) for r in records}
    reachable = sum(mats[r.id].labels.any() for r in records)
    print(
        f"{len(pool)} fit-pool cases, {len(held)} held-out; the fact is in some unit for {reachable} of {len(records)}"
    )

    rng = np.random.default_rng(args.seed)
    folds = rng.permutation(len(pool)) % args.folds
    methods = {
        "hand": None,
        "ascent": None,
        **{f"logistic C={c:g}": c for c in args.cs},
        **{f"near-hand λ={lam:g}": lam for lam in args.strengths},
    }

    def fit(name: str, strength: float | None, records: list) -> np.ndarray:
        matrices = [mats[r.id] for r in records]
        if name == "hand":
            return hand
        if name == "ascent":
            return coordinate_ascent(matrices, hand)
        if name.startswith("near-hand"):
            return shrunk_to_hand(matrices, hand, strength)
        return pairwise_logistic(matrices, hand, strength)

    out_of_fold = {name: {"hit1": 0, "hit3": 0, "answer": 0, "n": 0} for name in methods}
    per_fold: dict[str, list] = {name: [] for name in methods}
    fitted_by_fold: dict[str, list] = {name: [] for name in methods}
    for k in range(args.folds):
        train = [r for r, f in zip(pool, folds, strict=True) if f != k]
        test = [r for r, f in zip(pool, folds, strict=True) if f == k]
        for name, c in methods.items():
            w = fit(name, c, train)
            got = total(test, w)
            per_fold[name].append(got)
            fitted_by_fold[name].append(w)
            for key in got:
                out_of_fold[name][key] += got[key]
        print(f"fold {k + 1}/{args.folds}: " + ", ".join(f"{n} {per_fold[n][-1]['hit1']}" for n in methods), flush=True)
    figures: dict = {"cases": len(records), "pool": len(pool), "held_out_cases": len(held), "methods": {}}
    print(f"\ncross-validated ({args.folds} folds by case, {len(pool)} cases; fold-averaged rates)")
    print(f"{'weights':22s} {'hit@1':>7s} {'hit@3':>7s} {'answer':>7s}   (counts out of fold)")
    for name in methods:
        rates = {key: float(np.mean([f[key] / f["n"] for f in per_fold[name]])) for key in ("hit1", "hit3", "answer")}
        o = out_of_fold[name]
        print(
            f"{name:22s} {rates['hit1']:7.3f} {rates['hit3']:7.3f} {rates['answer']:7.3f}   "
            f"{o['hit1']}/{o['hit3']}/{o['answer']} of {o['n']}"
        )
        figures["methods"][name] = {"cv_rates": rates, "cv_counts": o}
    # Held out: weights fitted on the whole pool.
    print(f"\nheld-out files ({', '.join(HELD_OUT)}; weights fitted on all {len(pool)} pool cases)")
    print(f"{'weights':22s} " + " ".join(f"{f[:-6]:>22s}" for f in HELD_OUT) + f" {'all':>14s}")
    final: dict[str, dict] = {}
    for name, c in methods.items():
        w = fit(name, c, pool)
        final[name] = w
        cells = []
        figures["methods"][name]["held_out"] = {}
        for f in (*HELD_OUT, None):
            subset = [r for r in held if f is None or r.file == f]
            got = total(subset, w)
            figures["methods"][name]["held_out"][f or "all"] = got
            cells.append(f"{got['hit1']}/{got['hit3']}/{got['answer']} of {got['n']}")
        print(f"{name:22s} " + " ".join(f"{cell:>22s}" for cell in cells))
        figures["methods"][name]["weights_all_pool"] = w
        figures["methods"][name]["in_sample"] = total(pool, w)
    hand_held = {r.id: measure(r, hand) for r in held}
    for name in methods:
        if name == "hand":
            continue
        after = {r.id: measure(r, final[name]) for r in held}
        gained = sorted(i for i in after if after[i]["answer"] > hand_held[i]["answer"])
        lost = sorted(i for i in after if after[i]["answer"] < hand_held[i]["answer"])
        figures["methods"][name]["held_out_answer_flips"] = {"gained": gained, "lost": lost}
        print(f"  {name}: held-out answers gained {gained}, lost {lost}")
    print(
        "\nin-sample (fitted and scored on the pool): "
        + ", ".join(f"{n} {figures['methods'][n]['in_sample']['hit1']}" for n in methods)
    )
    print("\nweights fitted on the whole pool:")
    print(f"{'feature':15s} " + " ".join(f"{n[:14]:>14s}" for n in methods))
    for feature in NAMES:
        print(f"{feature:15s} " + " ".join(f"{final[n][feature]:14.4f}" for n in methods))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("capture")
    c.add_argument("--split", default="dev")
    c.add_argument("--questions", type=Path, default=None)
    c.add_argument("--out", type=Path, required=True)
    f = sub.add_parser("fit")
    f.add_argument("records", type=Path)
    f.add_argument("--folds", type=int, default=5)
    f.add_argument("--seed", type=int, default=19)
    f.add_argument("--cs", type=float, nargs="*", default=[0.1, 1.0, 10.0])
    f.add_argument("--strengths", type=float, nargs="*", default=[0.001, 0.01])
    f.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    capture(args) if args.command == "capture" else fit(args)


if __name__ == "__main__":
    main()
