"""`kbbot eval company`: everyday Slack questions about the four sample KBs, the way colleagues ask them.

The KBs are `knowledge_bases/<kb>/docs/` as they are, ingested through the application layer with each
kb.toml's description; every case is asked from one eval origin that may read all four, so routing,
refusal and answering are measured together. A case with history is asked as a thread: its earlier
questions first, and the bot's own answers to them kept as the thread's history.

The format of a case and how it is scored are in benchmarks/company/README.md; `validate_case` checks it.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.config import REPO_ROOT
from bot.core import Turn
from bot.eval.datasets import DatasetError, read_jsonl
from bot.eval.engine import ScopedBot, ask, progress
from bot.eval.metrics import percentile
from bot.eval.workspace import EvalWorkspace, KbBuild

BENCHMARK_DIR = REPO_ROOT / "benchmarks" / "company"
QUESTIONS_DIR = BENCHMARK_DIR / "questions"
KNOWLEDGE_BASES_DIR = REPO_ROOT / "knowledge_bases"
KBS = ("people", "finance", "engineering", "product")
IN_KB_KINDS = ("one-fact", "multi-fact", "table", "long-section", "follow-up")
OOK_KINDS = ("ook-topic", "ook-fact", "ook-near-miss")
KINDS = IN_KB_KINDS + OOK_KINDS
LANGS = ("en", "zh")
SPLITS = ("dev", "test", "all")
FIELDS = {"id", "kind", "lang", "history", "question", "kb", "document", "fact", "note"}
REQUIRED = FIELDS - {"note"}
ID_PATTERN = re.compile(r"^[a-z]+(?:-[a-z]+)*-\d{3,}$")
REFUSED = "insufficient_context"


def split_of(case_id: str) -> str:
    """dev or test, from the id alone (sha256 even → dev), so authors do not pick it."""
    return "dev" if int(hashlib.sha256(case_id.encode()).hexdigest(), 16) % 2 == 0 else "test"


def is_out_of_kb(case: dict) -> bool:
    return str(case.get("kind", "")).startswith("ook-")


def documents_of(case: dict) -> list[str]:
    document = case.get("document")
    return list(document) if isinstance(document, list) else [document] if document else []


def validate_case(case: object) -> list[str]:
    """What is wrong with one case per the agreed format (an empty list: nothing)."""
    if not isinstance(case, dict):
        return ["a case must be a JSON object"]
    problems = []
    missing = REQUIRED - case.keys()
    if missing:
        problems.append(f"missing fields: {', '.join(sorted(missing))}")
    unknown = case.keys() - FIELDS
    if unknown:
        problems.append(f"unknown fields: {', '.join(sorted(unknown))}")
    if not isinstance(case.get("id"), str) or not ID_PATTERN.match(case["id"]):
        problems.append(f"id {case.get('id')!r} is not <area>-NNN")
    kind = case.get("kind")
    if kind not in KINDS:
        problems.append(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    if case.get("lang") not in LANGS:
        problems.append(f"lang {case.get('lang')!r} is not en or zh")
    history = case.get("history")
    if not isinstance(history, list) or not all(isinstance(t, str) and t.strip() for t in history):
        problems.append("history must be a list of non-empty strings")
    elif kind == "follow-up" and not history:
        problems.append("a follow-up has history")
    elif kind in IN_KB_KINDS and kind != "follow-up" and history:
        problems.append(f"a {kind} case has no history (use kind follow-up)")
    if not isinstance(case.get("question"), str) or not case["question"].strip():
        problems.append("question must be a non-empty string")
    if "note" in case and not isinstance(case["note"], str):
        problems.append("note must be a string")
    if kind in OOK_KINDS:
        for name in ("kb", "document", "fact"):
            if case.get(name) is not None:
                problems.append(f"{name} must be null for an out-of-KB case")
    elif kind in IN_KB_KINDS:
        if case.get("kb") not in KBS:
            problems.append(f"kb {case.get('kb')!r} is not one of {', '.join(KBS)}")
        documents = case.get("document")
        if not documents_of(case) or not all(isinstance(d, str) and d for d in documents_of(case)):
            problems.append(f"document {documents!r} must be a file name or a list of them")
        fact = case.get("fact")
        if not isinstance(fact, str) or not fact.strip():
            problems.append("fact must be a non-empty regex")
        else:
            try:
                re.compile(fact, re.IGNORECASE)
            except re.error as exc:
                problems.append(f"fact is not a valid regex ({exc})")
    return problems


def load_cases(questions: Path = QUESTIONS_DIR) -> list[dict]:
    """Every case of every *.jsonl file in `questions`, checked; raises DatasetError naming file and line."""
    files = sorted(questions.glob("*.jsonl")) if questions.is_dir() else []
    if not files:
        raise DatasetError(f"no question files (*.jsonl) in {questions}")
    cases, seen = [], {}
    for path in files:
        for number, case in enumerate(read_jsonl(path), 1):
            where = f"{path.name}:{number}"
            problems = validate_case(case)
            if problems:
                raise DatasetError(f"{where}: {'; '.join(problems)}")
            if case["id"] in seen:
                raise DatasetError(f"{where}: id {case['id']!r} is already used at {seen[case['id']]}")
            seen[case["id"]] = where
            cases.append({**case, "file": path.name})
    return cases


def select(cases: Sequence[dict], split: str, limit: int = 0) -> list[dict]:
    if split not in SPLITS:
        raise DatasetError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    chosen = [c for c in cases if split == "all" or split_of(c["id"]) == split]
    if limit and limit < len(chosen):  # evenly spread: the files are grouped by area and kind
        chosen = [chosen[i * len(chosen) // limit] for i in range(limit)]
    return chosen


def kb_description(kb: str, root: Path = KNOWLEDGE_BASES_DIR) -> str:
    path = root / kb / "kb.toml"
    try:
        description = tomllib.loads(path.read_text(encoding="utf-8")).get("description")
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read the KB's description ({exc})") from exc
    if not isinstance(description, str) or not description.strip():
        raise DatasetError(f"{path}: no description")
    return description.strip()


def build_kbs(ws: EvalWorkspace, fresh: bool = False, root: Path = KNOWLEDGE_BASES_DIR) -> dict[str, KbBuild]:
    builds = {}
    for kb in KBS:
        docs = root / kb / "docs"
        if not docs.is_dir():
            raise DatasetError(f"missing {docs}")
        builds[kb] = ws.ensure_kb_from_folder(kb, kb_description(kb, root), docs, fresh=fresh)
        reused = " (reused)" if builds[kb].reused else ""
        ws.log(f"[company] KB {kb}: {builds[kb].documents} documents, {builds[kb].chunks} chunks{reused}")
    return builds


@dataclass
class Verdict:
    verdict: str  # answered_right | answered_wrong | refused_answerable | ook_refused | ook_answered
    fact_found: bool
    first_document: str | None


def score(case: dict, status: str, answer: str, cited: Sequence[str]) -> Verdict:
    first = cited[0] if cited else None
    if is_out_of_kb(case):
        return Verdict("ook_refused" if status == REFUSED else "ook_answered", False, first)
    if status != "answered":
        return Verdict("refused_answerable", False, first)
    found = re.search(case["fact"], answer, re.IGNORECASE) is not None
    right = found and first in documents_of(case)
    return Verdict("answered_right" if right else "answered_wrong", found, first)


def ask_thread(engine: ScopedBot, case: dict):
    """Ask the case's history in turn, keeping the bot's real answers as the thread, then the question."""
    turns: list[Turn] = []
    for earlier in case["history"]:
        reply = ask(engine, earlier, turns)
        turns += [Turn("user", earlier), Turn("assistant", reply.answer)]
    return ask(engine, case["question"], turns), turns


def eval_company(
    ws: EvalWorkspace,
    split: str = "test",
    limit: int = 0,
    fresh: bool = False,
    dump: Path | None = None,
    questions: Path = QUESTIONS_DIR,
    knowledge_bases: Path = KNOWLEDGE_BASES_DIR,
) -> dict:
    cases = select(load_cases(questions), split, limit)
    builds = build_kbs(ws, fresh, knowledge_bases)
    engine = ScopedBot(ws.bot, frozenset(KBS))
    engine.answer("warm-up: what is in the knowledge base?")  # loads the model and indexes outside the timings
    dump = dump or ws.dir / f"company-{split}.jsonl"
    dump.parent.mkdir(parents=True, exist_ok=True)
    rows, latencies = [], []
    bar = progress(ws, len(cases), "company")
    with dump.open("w", encoding="utf-8") as out:
        for case in cases:
            asked, turns = ask_thread(engine, case)
            latencies.append(asked.ms)
            cited = [c.document for c in asked.citations]
            verdict = score(case, asked.status, asked.answer, cited)
            row = {
                "id": case["id"],
                "split": split_of(case["id"]),
                "kind": case["kind"],
                "lang": case["lang"],
                "question": case["question"],
                "history": [{"role": t.role, "text": t.text} for t in turns],
                "standalone_query": asked.standalone,
                "status": asked.status,
                "answer": asked.answer,
                "cited_documents": [f"{c.kb}/{c.document}" for c in asked.citations],
                "expected": {"kb": case["kb"], "document": case["document"], "fact": case["fact"]},
                "verdict": verdict.verdict,
                "fact_found": verdict.fact_found,
                "top_kb": asked.top_kb,
                "ms": round(asked.ms, 1),
                "rounds": asked.graded,
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            rows.append(row)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    result = {
        "split": split,
        "cases": len(rows),
        "mode": engine.mode,
        **summarise(rows),
        "p50_ms": round(percentile(latencies, 50), 1) if latencies else 0.0,
        "p95_ms": round(percentile(latencies, 95), 1) if latencies else 0.0,
        "dump": str(dump),
        "kb_builds": {kb: b.to_json() for kb, b in builds.items()},
    }
    if split == "all":
        result["splits"] = {s: summarise([r for r in rows if r["split"] == s]) for s in ("dev", "test")}
    return result


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _tally(rows: Iterable[dict]) -> dict:
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row["verdict"]] += 1
    in_kb = counts["answered_right"] + counts["answered_wrong"] + counts["refused_answerable"]
    ook = counts["ook_refused"] + counts["ook_answered"]
    return {
        "in_kb": in_kb,
        "answered_right": _rate(counts["answered_right"], in_kb),
        "answered_wrong": _rate(counts["answered_wrong"], in_kb),
        "refused_answerable": _rate(counts["refused_answerable"], in_kb),
        "out_of_kb": ook,
        "ook_refused": _rate(counts["ook_refused"], ook),
    }


IN_KB_KEYS = ("answered_right", "answered_wrong", "refused_answerable")
OOK_KEYS = ("ook_refused",)


def summarise(rows: Sequence[dict]) -> dict:
    """Rates of the scored rows: overall, per kind, per language, follow-ups and Chinese."""
    per_kind = {}
    for kind in KINDS:
        of_kind = [r for r in rows if r["kind"] == kind]
        if of_kind:
            tally = _tally(of_kind)
            keys = OOK_KEYS if kind in OOK_KINDS else IN_KB_KEYS
            per_kind[kind] = {"n": len(of_kind)} | {k: tally[k] for k in keys}
    threads = [r for r in rows if r["history"]]
    thread_tally = _tally(threads)
    chinese = _tally(r for r in rows if r["lang"] == "zh")
    return {
        "overall": _tally(rows),
        "per_kind": per_kind,
        "per_lang": {lang: _tally(r for r in rows if r["lang"] == lang) for lang in LANGS},
        "follow_up": {
            "n": thread_tally["in_kb"],
            "answered_right": thread_tally["answered_right"],
            "out_of_kb": thread_tally["out_of_kb"],
            "ook_refused": thread_tally["ook_refused"],
        },
        "chinese": {
            "in_kb": chinese["in_kb"],
            "in_kb_right": chinese["answered_right"],
            "out_of_kb": chinese["out_of_kb"],
            "ook_refused": chinese["ook_refused"],
        },
    }


GOALS = (  # the goals, on the test split (offline mode)
    ("answered-and-right, in-KB", ("overall", "answered_right"), 0.90),
    ("out-of-KB refused", ("overall", "ook_refused"), 0.97),
    ("follow-ups answered-and-right", ("follow_up", "answered_right"), 0.85),
    ("Chinese in-KB answered-and-right", ("chinese", "in_kb_right"), 0.85),
    ("Chinese out-of-KB refused", ("chinese", "ook_refused"), 0.95),
)


def figures_on_test(r: dict) -> dict | None:
    """The test split's figures of a result (a run of split all carries both splits)."""
    if r["split"] == "test":
        return r
    return (r.get("splits") or {}).get("test")


def goal_rows(r: dict) -> list[tuple[str, float, float | None]]:
    summary = figures_on_test(r)
    rows = []
    for name, (group, key), target in GOALS:
        value = summary[group][key] if summary else None
        rows.append((name, target, value))
    return rows


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def format_company(r: dict) -> str:
    o = r["overall"]
    lines = [
        f"Company questions ({r['cases']} cases, split {r['split']}, {r['mode']} mode; KBs {', '.join(KBS)})",
        "",
        "| cases | n | answered-and-right | answered-wrong | refused (answerable) | out-of-KB refused |",
        "|---|---:|---:|---:|---:|---:|",
        f"| in-KB | {o['in_kb']} | {_f(o['answered_right'])} | {_f(o['answered_wrong'])} | "
        f"{_f(o['refused_answerable'])} | – |",
        f"| out-of-KB | {o['out_of_kb']} | – | – | – | {_f(o['ook_refused'])} |",
    ]
    for kind, t in r["per_kind"].items():
        if kind in OOK_KINDS:
            lines.append(f"| {kind} | {t['n']} | – | – | – | {_f(t['ook_refused'])} |")
        else:
            lines.append(
                f"| {kind} | {t['n']} | {_f(t['answered_right'])} | {_f(t['answered_wrong'])} | "
                f"{_f(t['refused_answerable'])} | – |"
            )
    for lang, t in r["per_lang"].items():
        if t["in_kb"] or t["out_of_kb"]:
            lines.append(
                f"| lang {lang} ({t['in_kb']} in-KB, {t['out_of_kb']} out-of-KB) | {t['in_kb'] + t['out_of_kb']} | "
                f"{_f(t['answered_right'])} | {_f(t['answered_wrong'])} | {_f(t['refused_answerable'])} | "
                f"{_f(t['ook_refused'])} |"
            )
    f, c = r["follow_up"], r["chinese"]
    lines += [
        "",
        f"follow-ups (in-KB cases asked as a thread, n={f['n']}): answered-and-right {_f(f['answered_right'])}; "
        f"Chinese in-KB (n={c['in_kb']}) {_f(c['in_kb_right'])}, Chinese out-of-KB refused (n={c['out_of_kb']}) "
        f"{_f(c['ook_refused'])}",
    ]
    for split, s in (r.get("splits") or {}).items():
        so = s["overall"]
        lines.append(
            f"- {split} split: in-KB {so['in_kb']} answered-and-right {_f(so['answered_right'])}, out-of-KB "
            f"{so['out_of_kb']} refused {_f(so['ook_refused'])}, follow-ups {_f(s['follow_up']['answered_right'])}, "
            f"Chinese {_f(s['chinese']['in_kb_right'])} / {_f(s['chinese']['ook_refused'])}"
        )
    lines.append(f"\nengine latency p50 {r['p50_ms']:.0f} ms, p95 {r['p95_ms']:.0f} ms; per-case dump: `{r['dump']}`")
    return "\n".join(lines)
