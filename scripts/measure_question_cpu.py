#!/usr/bin/env python
"""CPU per question on the answering thread: the GIL-bound Python a burst of Slack mentions queues behind.

In-process, offline (no OpenAI key): a copy of a synced data dir is opened with `KnowledgeBot`, warmed up,
then the 50 sample questions are asked `--rounds` times, one after another on one thread, with the query cache
cleared before each round (so every encode happens, as in the burst of scripts/measure_slack_latency.py).
Reported: the asking thread's own CPU per question (`time.thread_time`: the query encoder is a thread of its
own and is not counted), the process's CPU per question, and — with `--profile FILE` — a cProfile of the
asking thread (its top functions by cumulative and by own time are printed to stderr). The thread's CPU is split
into the engine's policies (the `AnswerEngine` methods the workflow's steps call, timed around each call: condense,
probes, routing, grading, reformulation, the answer) and the rest: the llama-index workflow runtime that runs the
steps, the steps' own glue (events, the trace) and the application layer around the engine (`KnowledgeBot.ask`).

    python scripts/measure_question_cpu.py --data-dir DATA [--rounds 3] [--profile /tmp/ask.prof] [--json]

Run it with PYTHONPATH=CHECKOUT to measure another checkout (interleave before/after in one session).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parent.parent


POLICIES = {  # the engine's methods the workflow's steps call, and the prober's
    "engine": ("candidate_kbs", "condense", "choose", "grade", "reformulate", "write_answer"),
    "prober": ("probe", "with_thread_scores"),
}


def time_policies(engine) -> list[float]:
    """Time the engine's policy calls on the calling thread (their CPU, summed into the returned cell): an
    instance attribute wrapping each method, so the steps call the same code, timed."""
    spent = [0.0]

    def timed(owner, name: str) -> None:
        method = getattr(owner, name)

        def call(*args, **kwargs):
            started = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                spent[0] += time.thread_time() - started

        setattr(owner, name, call)

    for name in POLICIES["engine"]:
        timed(engine, name)
    for name in POLICIES["prober"]:
        timed(engine.prober, name)
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a synced data dir (copied, left untouched)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", type=Path, default=None, help="write a cProfile of the asking thread here")
    parser.add_argument("--answers", type=Path, default=None, help="write each answer here (JSON lines, to diff)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from bot.config import Settings
    from bot.core.bot import KnowledgeBot
    from bot.core.origin import Origin

    questions = [
        json.loads(line)["question"]
        for line in (ROOT / "tests/fixtures/sample_questions.jsonl").read_text().splitlines()
        if line.strip()
    ]
    with tempfile.TemporaryDirectory(prefix="kbbot-question-cpu-") as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(args.data_dir, data, ignore=shutil.ignore_patterns("slack", "store.lock"))
        settings = Settings(
            _env_file=None,
            KBBOT_DATA_DIR=data,
            KBBOT_KNOWLEDGE_BASES_DIR=ROOT / "knowledge_bases",
            OPENAI_API_KEY=None,
            OPENAI_BASE_URL=None,
        )
        with KnowledgeBot(settings) as bot:
            bot.warm_up()
            origin = Origin.cli()
            policy_cpu = time_policies(bot.engine)
            profiler = cProfile.Profile() if args.profile else None
            thread_cpu, process_cpu, in_policies, statuses, answers = [], [], [], [], []
            for _ in range(args.rounds):
                bot.forget_query_vectors()
                for question in questions:
                    policy_cpu[0] = 0.0
                    started_thread, started_process = time.thread_time(), time.process_time()
                    if profiler:
                        profiler.enable()
                    result = bot.ask(origin, question)
                    if profiler:
                        profiler.disable()
                    thread_cpu.append(time.thread_time() - started_thread)
                    process_cpu.append(time.process_time() - started_process)
                    in_policies.append(policy_cpu[0])
                    statuses.append(result.answer.status)
                    answers.append({k: v for k, v in asdict(result.answer).items() if k != "timings_ms"})
    results = {
        "command": " ".join(["python", *sys.argv]),
        "code": str(Path(sys.modules["bot"].__file__).resolve().parent.parent),
        "load_average": os.getloadavg(),
        "questions": len(thread_cpu),
        "answered": statuses.count("answered"),
        "thread_cpu_ms_per_question": round(1000 * statistics.fmean(thread_cpu), 1),
        "thread_cpu_ms_median": round(1000 * statistics.median(thread_cpu), 1),
        "process_cpu_ms_per_question": round(1000 * statistics.fmean(process_cpu), 1),
        "policies_cpu_ms_per_question": round(1000 * statistics.fmean(in_policies), 1),
        "outside_policies_cpu_ms_per_question": round(
            1000 * (statistics.fmean(thread_cpu) - statistics.fmean(in_policies)), 1
        ),
    }
    if args.answers:
        args.answers.write_text("".join(json.dumps(a, sort_keys=True, default=str) + "\n" for a in answers))
    if profiler:
        profiler.dump_stats(args.profile)
        stats = pstats.Stats(str(args.profile), stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(30)
    print(json.dumps(results, indent=2) if args.json else results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
