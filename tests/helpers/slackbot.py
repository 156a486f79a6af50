"""kbbot's Slack surface in-process, exactly as `kbbot serve` runs it in HTTP mode, against the fake Slack.

`running_bot(settings, fake)` builds the app (`build_slack`), serves it on a free port of 127.0.0.1 and
yields a `SlackBot`: the URL, the app's dependencies, the fake, and a sender of signed requests.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from slack_bolt import App

from bot.config import Settings
from bot.core import KnowledgeBot
from bot.slack.deps import SlackDeps
from helpers.fake_slack import BOT_TOKEN, FakeSlack
from helpers.settings import build_settings
from helpers.slack_helpers import SIGNING_SECRET, SlackSender


def slack_settings_for(data_dir, api_url: str, **overrides) -> Settings:
    """The shared test Settings (no keys, no .env, sample KBs declared) plus Slack pointed at the fake."""
    slack = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": api_url}
    return build_settings(data_dir, **{**slack, **overrides})


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

    def settle(self, timeout: float = 10.0) -> None:
        """Wait (bounded) until the bot's background work is done."""
        deadline = time.monotonic() + timeout
        time.sleep(0.05)
        while not self.deps.idle():
            assert time.monotonic() < deadline, "the bot's background work did not finish"
            time.sleep(0.02)


@contextlib.contextmanager
def running_bot(settings: Settings, fake: FakeSlack, bot: KnowledgeBot | None = None, warm: bool = True) -> Iterator[SlackBot]:
    from bot.slack.app import build_slack
    from bot.slack.server import make_http_server

    app, deps = build_slack(settings, bot)
    server = make_http_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    if warm:
        deps.bot.warm_up()  # load the model before timing anything
    url = f"http://127.0.0.1:{server.server_address[1]}/slack/events"
    try:
        yield SlackBot(url, deps, app, fake, SlackSender(url, fake))
    finally:
        server.shutdown()
        server.server_close()
        deps.shutdown(timeout_s=30)
