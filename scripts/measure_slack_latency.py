#!/usr/bin/env python
"""Measure the Slack surface's latency against the fake Slack Web API (offline mode, all on 127.0.0.1).

kbbot runs as `kbbot serve` (HTTP mode, its own process, offline: no OpenAI key) with SLACK_API_URL pointing at
a fake Slack Web API in this process; signed Events API requests (app_mention) go to its /slack/events endpoint:

  1. sequential: N mentions one after another (each answered before the next is sent);
  2. concurrent: C mentions sent at the same moment;
  3. redeliveries: R events sent again with X-Slack-Retry-Num and the same event_id (must not be answered twice).

For every event it records the ack latency (the HTTP response to the signed request), the time to the first
visible feedback (:eyes: reaction or assistant.threads.setStatus) and the time to the first reply message
(chat.startStream or chat.postMessage in the thread). This is a measurement, not a test.

    .venv/bin/python scripts/measure_slack_latency.py [--data-dir .kbbot] [--sequential 30] [--concurrent 50]
        [--code DIR] [--json]

The burst's questions are ones this process has not been asked yet (as far as the question file allows), so
the query cache does not hide the encodes. `concurrent.first_reply_max_s` is the slowest first reply of the
burst and `concurrent.lost` the mentions with no reply at all within --timeout. --code runs another checkout's
kbbot (e.g. a worktree of main) with this script, so a before/after comparison can be interleaved in one session.

--data-dir is a synced store (e.g. after `kbbot kb sync`); it is copied to a temp dir first and left untouched.
Without one, the sample KBs are synced into a temp dir (slow: embeds every sample document).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from helpers.fake_slack import BOT_TOKEN, BOT_USER, FakeSlack  # noqa: E402
from helpers.slack_helpers import SIGNING_SECRET, SlackSender, unique  # noqa: E402

from bot.config import Settings  # noqa: E402

CHANNELS = {"people": "C0PEOPLE01", "engineering": "C0ENG00001", "product": "C0PRODUCT1", "finance": "C0FINANCE1"}
USER = "U0MEASURE1"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.4999)))
    return ordered[rank - 1]


def summary(values: list[float]) -> dict | None:
    if not values:
        return None
    ms = [v * 1000 for v in values]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 1),
        "p95_ms": round(percentile(ms, 95), 1),
        "p99_ms": round(percentile(ms, 99), 1),
        "max_ms": round(max(ms), 1),
        "mean_ms": round(statistics.fmean(ms), 1),
    }


def process_tree(pid: int) -> list[int]:
    """The process and all its descendants (kbbot serve's answering processes, its parsing workers)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            child, ppid = int(stat.parent.name), int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(child)
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    return tree


def cpu_by_process(pid: int) -> dict[int, float]:
    """User + system CPU time so far of a process and of each of its live descendants (Linux /proc)."""
    seconds = {}
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[member] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a process and its live descendants: the work a burst costs, whatever
    the load."""
    return sum(cpu_by_process(pid).values())


def rss_mb(pid: int) -> tuple[float, float, int]:
    """(resident MB summed, proportional MB — shared pages split between their sharers —, number of processes)
    of a process and its descendants."""
    rss = pss = 0
    tree = process_tree(pid)
    for member in tree:
        try:
            for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
                name, _, value = line.partition(":")
                if name in ("Rss", "Pss"):
                    kib = int(value.split()[0])
                    rss, pss = (rss + kib, pss) if name == "Rss" else (rss, pss + kib)
        except (OSError, ValueError, IndexError):
            continue
    return round(rss / 1024, 1), round(pss / 1024, 1), len(tree)


def prepare_data_dir(source: Path | None, workdir: Path) -> Path:
    target = workdir / "data"
    if source is not None and (source / "registry.sqlite3").exists():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("slack"))  # not its Slack state
        return target
    from tools.service import KnowledgeService

    print("no synced data dir given: syncing the sample KBs into a temp dir (slow)…", file=sys.stderr)
    KnowledgeService(Settings(_env_file=None, KBBOT_DATA_DIR=target).tools).sync()
    return target


class Probe:
    """Times for one mention: sent → ack, → first feedback, → first reply."""

    def __init__(self, fake: FakeSlack, channel: str, ts: str):
        self.fake, self.channel, self.ts = fake, channel, ts
        self.sent = self.ack = 0.0

    def first(self, methods: tuple[str, ...], key: str, match: str) -> float | None:
        times = [
            c.at
            for c in self.fake.calls
            if c.method in methods
            and c.params.get("channel", c.params.get("channel_id")) == self.channel
            and c.params.get(key) == match
        ]
        return min(times) - self.sent if times else None

    def feedback(self) -> float | None:
        options = [
            self.first(("reactions.add",), "timestamp", self.ts),
            self.first(("assistant.threads.setStatus",), "thread_ts", self.ts),
        ]
        options = [o for o in options if o is not None]
        return min(options) if options else None

    def reply(self) -> float | None:
        return self.first(("chat.startStream", "chat.postMessage"), "thread_ts", self.ts)


def send_mention(sender: SlackSender, fake: FakeSlack, question: dict) -> tuple[Probe, dict, str]:
    channel = CHANNELS.get(question.get("kb") or "people", "C0PEOPLE01")
    message = fake.add_message(channel, USER, f"<@{BOT_USER}> {question['question']}")
    event = {
        "type": "app_mention",
        "user": USER,
        "text": message["text"],
        "ts": message["ts"],
        "channel": channel,
        "event_ts": message["ts"],
    }
    probe = Probe(fake, channel, message["ts"])
    event_id = unique("Ev")
    probe.sent = time.monotonic()
    response = sender.event(event, event_id=event_id)
    probe.ack = response.elapsed_s
    assert response.status == 200, response
    return probe, event, event_id


def wait_replies(fake: FakeSlack, probes: list[Probe], timeout: float) -> list[Probe]:
    """Wait until every probe has its reply or the timeout passes; the probes still without one (lost)."""
    deadline = time.monotonic() + timeout
    while True:
        waiting = [p for p in probes if not fake.bot_replies(p.channel, p.ts)]
        if not waiting or time.monotonic() > deadline:
            return waiting
        time.sleep(0.05)


def start_kbbot_serve(
    data_dir: Path, api_url: str, workdir: Path, code: Path, extra_env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """`kbbot serve` in HTTP mode as its own process, environment built from scratch (no .env, no keys) plus
    `extra_env` (e.g. KBBOT_SLACK_WORKERS)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    env.update(
        {
            "KBBOT_DATA_DIR": str(data_dir),
            "KBBOT_KNOWLEDGE_BASES_DIR": str(ROOT / "knowledge_bases"),
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": api_url,
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(code),  # this checkout's code, not whichever one the venv was installed from
            **(extra_env or {}),
        }
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "serve.log", "w"),  # noqa: SIM115 - the child's log, open as long as it runs
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                return process, f"{url}/slack/events"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"kbbot serve did not start; see {workdir / 'serve.log'}") from None
            time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", type=Path, default=ROOT / ".kbbot", help="a synced data dir to copy (default: .kbbot)"
    )
    parser.add_argument("--sequential", type=int, default=30)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--redeliveries", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a mention may wait for its reply")
    parser.add_argument("--code", type=Path, default=ROOT, help="the kbbot checkout `kbbot serve` runs")
    parser.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        help="record the burst with this py-spy binary (raw stacks of the GIL holder → $TMPDIR/kbbot-py-spy-burst.txt)",
    )
    parser.add_argument("--py-spy-rate", type=int, default=100, help="py-spy samples per second (with --py-spy)")
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="a setting for kbbot serve (repeatable)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    questions = [
        json.loads(line)
        for line in (ROOT / "tests/fixtures/sample_questions.jsonl").read_text().splitlines()
        if line.strip()
    ]
    with tempfile.TemporaryDirectory(prefix="kbbot-latency-") as tmp:
        data_dir = prepare_data_dir(args.data_dir if args.data_dir and args.data_dir.exists() else None, Path(tmp))
        fake = FakeSlack().start()
        extra_env = dict(setting.split("=", 1) for setting in args.env)
        process, events_url = start_kbbot_serve(data_dir, fake.api_url, Path(tmp), args.code.resolve(), extra_env)
        sender = SlackSender(events_url, fake)
        try:
            started = time.monotonic()
            warm, _, _ = send_mention(
                sender, fake, {"question": "How many vacation days do full-time staff get?", "kb": "people"}
            )
            if wait_replies(fake, [warm], timeout=300):  # the first answer loads the model (serve warms up too)
                raise SystemExit(f"the warm-up question got no reply; see {Path(tmp) / 'serve.log'}")
            print(f"kbbot serve up and warm in {time.monotonic() - started:.1f}s", file=sys.stderr)
            fake.reset()

            # The burst takes the first questions, the sequential phase the last ones: as few repeats as possible.
            sequential: list[Probe] = []
            sequential_lost = 0
            for i in range(args.sequential):
                probe, _, _ = send_mention(sender, fake, questions[-1 - i % len(questions)])
                sequential_lost += len(wait_replies(fake, [probe], timeout=args.timeout))
                sequential.append(probe)

            spy, spy_output = None, Path(tempfile.gettempdir()) / "kbbot-py-spy-burst.txt"
            if args.py_spy is not None:
                spy = subprocess.Popen(
                    [str(args.py_spy), "record", "--pid", str(process.pid), "--format", "raw", "--threads", "--gil",
                     "--nonblocking", "--rate", str(args.py_spy_rate), "--output", str(spy_output)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                time.sleep(1.0)
            cpu_before, own_cpu_before = cpu_by_process(process.pid), time.process_time()
            calls_before = len(fake.calls)
            with ThreadPoolExecutor(args.concurrent) as pool:
                barrier = threading.Barrier(args.concurrent)

                def fire(i: int) -> tuple[Probe, dict, str]:
                    barrier.wait()
                    return send_mention(sender, fake, questions[i % len(questions)])

                fired = list(pool.map(fire, range(args.concurrent)))
            concurrent = [p for p, _, _ in fired]
            burst_started = min(p.sent for p in concurrent)
            lost = wait_replies(fake, concurrent, timeout=args.timeout)
            cpu_after = cpu_by_process(process.pid)
            burst_cpu_s = sum(cpu_after.values()) - sum(cpu_before.get(p, 0.0) for p in cpu_after)
            serving_cpu_s = cpu_after.get(process.pid, 0.0) - cpu_before.get(process.pid, 0.0)
            serve_rss_mb, serve_pss_mb, serve_processes = rss_mb(process.pid)
            load_generator_cpu_s = time.process_time() - own_cpu_before
            burst_calls = Counter(c.method for c in fake.calls[calls_before:])
            if spy is not None:
                spy.send_signal(2)
                spy.wait(timeout=30)
            answered = [p for p in concurrent if p not in lost]
            burst_done = max((p.sent + p.reply() for p in answered), default=burst_started)
            first_replies = [p.reply() for p in answered]

            # Slack's retries of delivered events (same event_id, X-Slack-Retry-Num): acked, never answered again.
            redelivery_acks = []
            replies_before = sum(len(fake.bot_replies(p.channel, p.ts)) for p in concurrent)
            for i, (_, event, event_id) in enumerate(fired[: args.redeliveries]):
                retry = sender.event(event, event_id=event_id, retry_num=1 + i % 3)
                redelivery_acks.append(retry.elapsed_s)
            time.sleep(2.0)  # a measurement, not a test: give a wrong second answer time to show up
            replies_after = sum(len(fake.bot_replies(p.channel, p.ts)) for p in concurrent)

            events_sent = args.sequential + args.concurrent + args.redeliveries
            results = {
                "command": " ".join(["python", *sys.argv]),
                "code": str(args.code.resolve()),
                "env": extra_env,
                "load_average": os.getloadavg(),
                "mode": "offline",
                "cpus": os.cpu_count(),
                "signed_events": events_sent,
                "ack_all": summary([p.ack for p in sequential + concurrent] + redelivery_acks),
                "sequential": {
                    "ack": summary([p.ack for p in sequential]),
                    "first_feedback": summary([p.feedback() for p in sequential]),
                    "first_reply": summary([p.reply() for p in sequential if p.reply() is not None]),
                    "lost": sequential_lost,
                },
                "concurrent": {
                    "n": args.concurrent,
                    "first_reply_max_s": round(max(first_replies), 2) if first_replies else None,
                    "first_reply_p50_s": round(percentile(first_replies, 50), 2) if first_replies else None,
                    "first_reply_p95_s": round(percentile(first_replies, 95), 2) if first_replies else None,
                    "lost": len(lost),
                    "ack": summary([p.ack for p in concurrent]),
                    "first_feedback": summary([f for p in concurrent if (f := p.feedback()) is not None]),
                    "first_reply": summary(first_replies),
                    "burst_wall_s": round(burst_done - burst_started, 2),
                    "burst_cpu_s": round(burst_cpu_s, 2),  # kbbot serve's CPU time for the burst (all its processes)
                    "serving_process_cpu_s": round(serving_cpu_s, 2),  # of which kbbot serve's own process
                    "serve_rss_mb": serve_rss_mb,  # kbbot serve's resident memory after the burst, all its processes
                    "serve_pss_mb": serve_pss_mb,  # the same, shared pages counted once
                    "serve_processes": serve_processes,
                    # this process's: the senders and the fake Slack Web API, competing for the same cores
                    "load_generator_cpu_s": round(load_generator_cpu_s, 2),
                    # Web API calls kbbot made during the burst, per mention (each an HTTP round trip under the GIL)
                    "web_api_calls_per_mention": {
                        method: round(n / args.concurrent, 2) for method, n in sorted(burst_calls.items())
                    },
                },
                "redeliveries": {"ack": summary(redelivery_acks), "extra_replies": replies_after - replies_before},
            }
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
            fake.stop()

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"\n{events_sent} signed events, engine mode {results['mode']}, {results['cpus']} CPUs")
    header = f"{'':34} {'n':>4} {'p50':>9} {'p95':>9} {'p99':>9} {'max':>9}"
    print(header)

    def row(name: str, s: dict) -> None:
        cells = " ".join(f"{s[k]:>7.1f}ms" for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms"))
        print(f"{name:34} {s['n']:>4} {cells}")

    if results["ack_all"]:
        row("ack (all events)", results["ack_all"])
    for phase in ("sequential", "concurrent"):
        for metric in ("ack", "first_feedback", "first_reply"):
            if results[phase][metric]:
                row(f"{phase}: {metric.replace('_', ' ')}", results[phase][metric])
    if results["redeliveries"]["ack"]:
        row("redelivery ack", results["redeliveries"]["ack"])
    print(
        f"concurrent burst of {args.concurrent}: slowest first reply {results['concurrent']['first_reply_max_s']} s, "
        f"lost {results['concurrent']['lost']}, all answered in {results['concurrent']['burst_wall_s']} s; "
        f"redeliveries answered again: {results['redeliveries']['extra_replies']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
