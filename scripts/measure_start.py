#!/usr/bin/env python
"""Time kbbot's start-up: `make run` to the console prompt and to the first answer, and the scale cold start.

Two or more variants (a checkout each: `LABEL=PATH`) are measured in the same run, interleaved (A, B, A, B, …),
so that the machine's load falls on all of them alike; the load (`os.getloadavg`) is printed with each row.

    # `make run` with the sample KBs already synced (the second `make run` of a user):
    .venv/bin/python scripts/measure_start.py run --variant main=/tmp/main --variant new=. --data-dir .kbbot

    # `kbbot eval scale`'s cold start (process start → first answer) on an existing 100k data dir per variant
    # (copies of .../eval/scale/embedded-100000: each run publishes one document into it):
    .venv/bin/python scripts/measure_start.py scale --variant main=/tmp/main,/tmp/s-main --variant new=.,/tmp/s-new

`run` copies --data-dir once per variant, runs `make run` in each checkout (PYTHONPATH set to it, so its own
code runs; `--skip-setup-check` passes `-o .venv/.installed` for a checkout whose `.venv` is borrowed), and
records the seconds from spawning `make` to the first `you>` prompt, to the answer of one question (the next
prompt), and from `/quit` to the exit. One unmeasured run per variant first warms the file cache.
`scale` runs `python -m bot.eval.scale` (the child `kbbot eval scale` measures in) with a request naming that
variant's data dir and reports its `cold_start_s` and parts. This is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = b"you> "
QUESTION = "How many weeks of paid parental leave does the primary caregiver get?"
TIMEOUT_S = 900


def _env(repo: Path, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "KBBOT_", "CHROMA_"))}
    env["PYTHONPATH"] = str(repo)
    env["KBBOT_DATA_DIR"] = str(data_dir)
    return env


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


class Transcript:
    """A child's stdout, read as it comes, with the moment each expected piece of text first appeared."""

    def __init__(self, process: subprocess.Popen, started: float):
        self.process, self.started, self.buffer = process, started, b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(process.stdout, selectors.EVENT_READ)

    def wait_for(self, text: bytes, after: int) -> tuple[float, int]:
        """Seconds since the start when `text` appeared at or after offset `after`, and where it ended."""
        deadline = time.monotonic() + TIMEOUT_S
        while (found := self.buffer.find(text, after)) < 0:
            if time.monotonic() > deadline or not self.selector.select(timeout=deadline - time.monotonic()):
                raise RuntimeError(f"no {text!r} within {TIMEOUT_S} s; output so far:\n{self.buffer.decode()[-2000:]}")
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"exited before {text!r}:\n{self.buffer.decode()[-2000:]}")
            self.buffer += chunk
        return time.monotonic() - self.started, found + len(text)


def time_make_run(repo: Path, data_dir: Path, skip_setup_check: bool) -> dict:
    command = ["make", "-C", str(repo), *(["-o", ".venv/.installed"] if skip_setup_check else []), "run"]
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_env(repo, data_dir),
    )
    transcript = Transcript(process, started)
    try:
        prompt_s, end = transcript.wait_for(PROMPT, 0)
        process.stdin.write(QUESTION.encode() + b"\n")
        process.stdin.flush()
        answer_s, end = transcript.wait_for(PROMPT, end)
        answered = b"[1]" in transcript.buffer[:end]
        process.stdin.write(b"/quit\n")
        process.stdin.flush()
        quit_at = time.monotonic()
        process.wait(timeout=120)
        exit_s = time.monotonic() - quit_at
    finally:
        if process.poll() is None:
            process.kill()
    return {
        "prompt_s": round(prompt_s, 2),
        "first_answer_s": round(answer_s, 2),
        "answered": answered,
        "exit_s": round(exit_s, 2),
    }


def time_scale_cold_start(repo: Path, data_dir: Path) -> dict:
    request = json.loads((data_dir / "scale-request.json").read_text(encoding="utf-8"))
    request["data_dir"] = str(data_dir)
    request_file = data_dir / "scale-request-measure-start.json"
    request_file.write_text(json.dumps(request), encoding="utf-8")
    env = _env(repo, data_dir)
    spawned = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "bot.eval.scale", str(request_file), repr(spawned)],
        env=env,
        cwd=str(repo),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bot.eval.scale failed in {repo}: {done.stderr[-3000:]}")
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "cold_start_s": measured["cold_start_s"],
        "parts_s": measured["cold_start_parts_s"],
        "first_answer_status": measured["first_answer_status"],
        "ask_p95_ms": measured["ask_p95_ms"],
        "peak_rss_mb": measured["peak_rss_mb"],
    }


def _variants(specs: list[str], with_data_dirs: bool) -> list[tuple[str, Path, Path | None]]:
    variants = []
    for spec in specs:
        label, _, rest = spec.partition("=")
        repo, _, data_dir = rest.partition(",")
        if not label or not repo or (with_data_dirs and not data_dir):
            want = "LABEL=CHECKOUT,DATA_DIR" if with_data_dirs else "LABEL=CHECKOUT"
            raise SystemExit(f"--variant {spec!r}: expected {want}")
        variants.append((label, Path(repo).resolve(), Path(data_dir).resolve() if data_dir else None))
    return variants


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("run", "scale"))
    parser.add_argument("--variant", action="append", required=True, help="LABEL=CHECKOUT (scale: ,DATA_DIR)")
    parser.add_argument("--data-dir", type=Path, help="run: a data dir with the sample KBs synced (copied)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-setup-check", action="store_true", help="run: make -o .venv/.installed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    variants = _variants(args.variant, with_data_dirs=args.what == "scale")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="kbbot-start-") as tmp:
        if args.what == "run":
            if args.data_dir is None or not args.data_dir.is_dir():
                raise SystemExit("run needs --data-dir: a data dir with the sample KBs synced")
            copies = {}
            for label, repo, _ in variants:
                copies[label] = Path(tmp) / label
                shutil.copytree(args.data_dir, copies[label], ignore=shutil.ignore_patterns("store.lock"))
                time_make_run(repo, copies[label], args.skip_setup_check)  # warm-up, not counted
        for round_ in range(1, args.rounds + 1):
            for label, repo, data_dir in variants:
                load = _load()
                if args.what == "run":
                    row = time_make_run(repo, copies[label], args.skip_setup_check)
                else:
                    row = time_scale_cold_start(repo, data_dir)
                rows.append({"variant": label, "round": round_, "load": load, **row})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    summary = {}
    for label, _, _ in variants:
        mine = [r for r in rows if r["variant"] == label]
        keys = ("prompt_s", "first_answer_s") if args.what == "run" else ("cold_start_s",)
        summary[label] = {f"median_{k}": round(statistics.median(r[k] for r in mine), 2) for k in keys}
    if args.json:
        print(json.dumps({"rows": rows, "median": summary}))
    else:
        for label, figures in summary.items():
            print(label, " ".join(f"{k} {v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
