"""The status line under a question (assistant.threads.setStatus): latest text wins, one update in flight or queued
at a time, nothing after close. Real parts: the app's own side pool and a Web API client talking to the fake Slack."""

from __future__ import annotations

import threading
import time

from helpers.fake_slack import BOT_TOKEN
from slack_sdk import WebClient

from bot.slack.conversation import StatusReporter
from bot.slack.deps import SIDE_WORKERS

CHANNEL, THREAD = "C0PEOPLE01", "1700000000.000100"


def statuses(bot) -> list[str]:
    return [
        c.params.get("status")
        for c in bot.fake.calls_of("assistant.threads.setStatus")
        if c.params.get("thread_ts") == THREAD
    ]


def sent(bot, expected: list[str], timeout: float = 10.0) -> list[str]:
    """The thread's statuses once `expected` have gone out (or the timeout passed), and a moment more."""
    deadline = time.monotonic() + timeout
    while len(statuses(bot)) < len(expected) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)  # a wrong extra update would land now
    return statuses(bot)


def test_statuses_queued_behind_a_busy_side_pool_send_only_the_latest_and_later_ones_still_go_out(bot):
    client = WebClient(token=BOT_TOKEN, base_url=bot.fake.api_url)
    reporter = StatusReporter(bot.deps, client, CHANNEL, THREAD)
    release, busy = threading.Event(), threading.Barrier(SIDE_WORKERS + 1)

    def occupy() -> None:
        busy.wait(timeout=10)
        release.wait(timeout=10)

    for _ in range(SIDE_WORKERS):  # every side thread busy: the statuses queue up
        bot.deps.side.submit(occupy)
    busy.wait(timeout=10)
    reporter("Searching the knowledge bases…")
    reporter("Searching people…")
    reporter("Writing the answer…")
    release.set()
    assert sent(bot, ["Writing the answer…"]) == ["Writing the answer…"]

    reporter("Searching people again (keywords only)…")  # after a flush went out: a new one is queued
    expected = ["Writing the answer…", "Searching people again (keywords only)…"]
    assert sent(bot, expected) == expected

    reporter.close()
    reporter("Too late")
    assert sent(bot, [*expected, "Too late"], timeout=0.3) == expected
