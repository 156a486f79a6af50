"""Slack fixtures: a fake Slack Web API, and kbbot's real HTTP endpoint receiving signed requests.

The bot runs in-process exactly as `kbbot serve` runs it in HTTP mode (`build_slack` → `make_http_server`), on a free port of 127.0.0.1, with the real engine over the sample KBs (offline).
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass

import pytest
from fake_slack import BOT_TOKEN, FakeSlack
from helpers.settings import build_settings
from slack_bolt import App
from slack_helpers import FINANCE_MEMBERS, SIGNING_SECRET, SlackSender

from bot.config import Settings
from bot.core import KnowledgeBot
from bot.slack.deps import SlackDeps


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

    with KnowledgeService(slack_settings.tools) as service:
        yield service


@dataclass
class SlackBot:
    url: str
    deps: SlackDeps
    app: App
    fake: FakeSlack
    send: SlackSender

    @property
    def kbbot(self) -> KnowledgeBot:
        return self.deps.bot


@pytest.fixture(scope="module")
def slack_bot(slack_settings, slack_service, fake_slack):
    """`kbbot serve`'s HTTP mode, in-process on a free port, with the engine warmed up once."""
    from bot.slack.app import build_slack
    from bot.slack.server import make_http_server

    app, deps = build_slack(slack_settings, KnowledgeBot(slack_settings, service=slack_service))
    server = make_http_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    deps.bot.warm_up()  # load the model before timing anything
    url = f"http://127.0.0.1:{server.server_address[1]}/slack/events"
    yield SlackBot(url, deps, app, fake_slack, SlackSender(url, fake_slack))
    server.shutdown()
    server.server_close()
    deps.shutdown(timeout_s=30)


@pytest.fixture
def bot(slack_bot):
    """Per test: a clean fake Slack (members of the finance channel set), streaming back on."""
    fake = slack_bot.fake
    fake.reset()
    fake.members = {"C0FINANCE1": list(FINANCE_MEMBERS), "C0PEOPLE01": ["U0HRLEAD01", "U0EMPLOY01"]}
    slack_bot.deps.streaming.enabled = True
    slack_bot.deps.status.enabled = True
    slack_bot.kbbot.membership.forget()
    return slack_bot

