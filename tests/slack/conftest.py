"""Slack fixtures: a fake Slack Web API, and kbbot's real HTTP endpoint receiving signed requests.

The bot runs in-process exactly as `kbbot serve` runs it in HTTP mode (tests/helpers/slackbot.py), on a free
port of 127.0.0.1, with the real engine over the sample KBs (offline).
"""

from __future__ import annotations

import shutil

import pytest
from helpers.fake_slack import FakeSlack
from helpers.slack_helpers import FINANCE_MEMBERS
from helpers.slackbot import running_bot, slack_settings_for


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


@pytest.fixture(scope="module")
def slack_settings(slack_data_dir, fake_slack):
    return slack_settings_for(slack_data_dir, fake_slack.api_url)


@pytest.fixture(scope="module")
def slack_bot(slack_settings, fake_slack):
    """`kbbot serve`'s HTTP mode, in-process on a free port, with the engine warmed up once."""
    with running_bot(slack_settings, fake_slack) as bot:
        yield bot


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
