"""A burst: 200 signed events and 3 uploads at once (offline mode), against the fake Slack.

Every request is acknowledged within Slack's 3 seconds (p99 goes into the figures line), every question is
answered or told "busy", none twice, and every upload ends `ready`.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import figures
from helpers.fake_slack import FakeSlack
from helpers.slack_helpers import dm_channel, unique
from helpers.slackbot import running_bot, slack_settings_for

from bot.core import Origin
from bot.slack.conversation import BUSY

QUESTIONS = [
    "How many vacation days do full-time staff get per year?",
    "How long is an OAuth access token valid for the API?",
    "What share of traffic does the production canary get, and for how long?",
    "How many paid sick days are there per year?",
    "What is the parking policy for visitors on Mars?",  # refused: nothing in the KBs
]
CHANNELS = ["C0PEOPLE01", "C0ENG00001", "C0PRODUCT1"]
HR_LEAD = "U0HRLEAD01"
EVENTS = 200


@pytest.fixture(scope="module")
def loaded(synced_data_dir, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("load") / "data"
    shutil.copytree(synced_data_dir, data_dir)
    fake = FakeSlack().start()
    with running_bot(slack_settings_for(data_dir, fake.api_url), fake) as bot:
        yield bot
    fake.stop()


def test_a_burst_of_events_and_uploads_is_acked_answered_once_and_nothing_is_lost(loaded):
    bot, fake = loaded, loaded.fake
    uploads = [
        fake.add_file(
            f"load-note-{i}-{unique('')}.md", f"# Load note {i}\n\nThe burst test note number {i}.\n".encode()
        )
        for i in range(3)
    ]

    def send(i: int):
        text = QUESTIONS[i % len(QUESTIONS)]
        if i % 2:
            message, response = bot.send.mention(CHANNELS[i % len(CHANNELS)], f"U0LOAD{i:04d}", text)
            return (message["channel"] if "channel" in message else CHANNELS[i % len(CHANNELS)]), message, response
        user = f"U0LOAD{i:04d}"
        message, response = bot.send.dm(user, text)
        return dm_channel(user), message, response

    def upload(meta: dict):
        return bot.send.dm(HR_LEAD, "add this to people", subtype="file_share", files=[meta])

    with ThreadPoolExecutor(max_workers=48) as pool:
        upload_futures = [pool.submit(upload, meta) for meta in uploads]
        sent = list(pool.map(send, range(EVENTS)))
        upload_sent = [f.result() for f in upload_futures]

    acks_ms = [r.elapsed_s * 1000 for _, _, r in sent] + [r.elapsed_s * 1000 for _, r in upload_sent]
    for ms in acks_ms:
        figures.observe_ack(ms)
    assert all(r.status == 200 for _, _, r in sent) and all(r.status == 200 for _, r in upload_sent)
    assert max(acks_ms) < 3000, f"slowest ack {max(acks_ms):.0f} ms"

    def all_replied():
        return all(fake.bot_replies(channel, m["ts"]) for channel, m, _ in sent)

    fake.wait_for(all_replied, timeout=240, what=f"a reply to each of the {EVENTS} questions")
    bot.settle(timeout=120)
    replies = {m["ts"]: fake.bot_replies(channel, m["ts"]) for channel, m, _ in sent}
    twice = [ts for ts, r in replies.items() if len(r) != 1]
    assert not twice, f"{len(twice)} questions got more than one reply"
    busy = sum(r[0]["text"] == BUSY for r in replies.values())
    answered = EVENTS - busy
    assert answered >= bot.deps.answers.capacity // 2, f"only {answered} answered"
    figures.add("events_held", EVENTS)

    [people] = [v for v in bot.kbbot.visible_kbs(Origin.cli()) if v.name == "people"]
    states = {d.name: d.state for d in people.documents}
    assert all(states.get(meta["name"]) == "ready" for meta in uploads), states
    lost = sum(states.get(meta["name"]) != "ready" for meta in uploads) + len(twice)
    figures.add("lost", lost)
    print(
        f"\nburst: {EVENTS} events, {answered} answered, {busy} told busy; acks p99 {figures.p99_ack_ms():.0f} ms, "
        f"max {max(acks_ms):.0f} ms; 3 uploads ready"
    )
