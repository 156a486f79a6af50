"""kbbot's Slack surface in-process, exactly as `kbbot serve` runs it in HTTP mode, against the fake Slack.

`running_bot(settings, fake)` builds the app (`build_slack`), serves it on a free port of 127.0.0.1 and
yields a `SlackBot`: the URL, the app's dependencies, the fake, and a sender of signed requests.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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
def running_bot(
    settings: Settings, fake: FakeSlack, bot: KnowledgeBot | None = None, warm: bool = True
) -> Iterator[SlackBot]:
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


# --- `kbbot serve` as its own process ---------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServeProcess:
    process: subprocess.Popen
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slack/events"

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, f"kbbot serve exited: {self.log.read_text(errors='replace')[-2000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                assert time.monotonic() < deadline, "kbbot serve did not start listening"
                time.sleep(0.1)


def spawn_serve(settings: Settings, workdir: Path, port: int | None = None, **env: str) -> ServeProcess:
    """`kbbot serve` in HTTP mode on 127.0.0.1 (a clean environment built from `settings`); logs to a file."""
    from helpers.cli import child_env, kbbot_command

    port = port or free_port()
    log = workdir / f"serve-{port}-{time.monotonic_ns()}.log"
    process = subprocess.Popen(
        [*kbbot_command(), "-v", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=child_env(settings, **env),
        cwd=str(workdir),
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    return ServeProcess(process, port, log)
