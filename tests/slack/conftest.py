"""Slack fixtures: a fake Slack Web API, and kbbot's real HTTP endpoint receiving signed requests.

The bot runs in-process exactly as `kbbot serve` runs it in HTTP mode (`build_runtime` → `build_app` →
`make_http_server`), on a free port of 127.0.0.1, with the real engine over the sample KBs (offline).
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass

import pytest
from fake_slack import BOT_TOKEN, FakeSlack
from helpers.settings import build_settings
from slack_helpers import FINANCE_MEMBERS, SIGNING_SECRET, SlackSender

from bot.config import Settings


@pytest.fixture(scope="module")
def fake_slack():
    fake = FakeSlack().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def slack_data_dir(synced_data_dir, tmp_path_factory):
    """A private copy of the synced sample store for this module's bot (uploads and deletes are fine)."""
    data_dir = tmp_path_factory.mktemp("slack") / "data"
    shutil.copytree(synced_data_dir, data_dir)
    return data_dir


def slack_settings_for(data_dir, api_url: str, **overrides) -> Settings:
    """The shared test Settings (no keys, no .env, sample KBs declared) plus Slack pointed at the fake."""
    slack = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": api_url}
    return build_settings(data_dir, **{**slack, **overrides})


@pytest.fixture(scope="module")
def slack_settings(slack_data_dir, fake_slack):
    return slack_settings_for(slack_data_dir, fake_slack.api_url)


@pytest.fixture(scope="module")
def slack_service(slack_settings):
    from tools.service import KnowledgeService

    with KnowledgeService(slack_settings) as service:
        yield service


@dataclass
class SlackBot:
    url: str
    runtime: object
    app: object
    fake: FakeSlack
    send: SlackSender


@pytest.fixture(scope="module")
def slack_bot(slack_settings, slack_service, fake_slack):
    """`kbbot serve`'s HTTP mode, in-process on a free port, with the engine warmed up once."""
    from bot.slack.app import build_app
    from bot.slack.runtime import build_runtime
    from bot.slack.server import make_http_server

    runtime = build_runtime(slack_settings, service=slack_service)
    app = build_app(slack_settings, runtime)
    server = make_http_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    runtime.engine.answer("How many vacation days do full-time staff get?")  # load the model before timing anything
    url = f"http://127.0.0.1:{server.server_address[1]}/slack/events"
    yield SlackBot(url, runtime, app, fake_slack, SlackSender(url, fake_slack))
    server.shutdown()
    server.server_close()
    runtime.shutdown(wait=True)


@pytest.fixture
def bot(slack_bot):
    """Per test: a clean fake Slack (members of the finance channel set), streaming back on."""
    fake = slack_bot.fake
    fake.reset()
    fake.members = {"C0FINANCE1": list(FINANCE_MEMBERS), "C0PEOPLE01": ["U0HRLEAD01", "U0EMPLOY01"]}
    slack_bot.runtime.streaming.enabled = True
    slack_bot.runtime.status.enabled = True
    slack_bot.runtime.members._members.clear()
    return slack_bot

