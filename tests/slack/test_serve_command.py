"""`kbbot serve` as a process: HTTP mode with signature checks, Socket Mode selection, clear config errors."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
from helpers.cli import child_env, kbbot_command
from helpers.fake_slack import BOT_TOKEN
from helpers.settings import build_settings
from helpers.slack_helpers import SIGNING_SECRET, sign

from bot.config import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_settings(tmp_path, api_url: str, **overrides) -> Settings:
    """An empty data dir is enough: these tests are about start-up and request checks, not answers."""
    slack = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": api_url}
    return build_settings(tmp_path / "data", **{**slack, **overrides})


def spawn(settings: Settings, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*kbbot_command(), "serve", *args],
        env=child_env(settings, KBBOT_SLACK_WARMUP="off"),
        cwd=str(settings.data_dir.parent),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_http(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def post(url: str, body: str, headers: dict) -> int:
    request = urllib.request.Request(url, data=body.encode(), headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serve_http_mode_verifies_signatures(tmp_path, fake_slack):
    port = free_port()
    process = spawn(serve_settings(tmp_path, fake_slack.api_url), "--host", "127.0.0.1", "--port", str(port))
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        url = f"http://127.0.0.1:{port}/slack/events"
        body = json.dumps({"type": "url_verification", "challenge": "abc", "token": "x"})
        assert post(url, body, sign(body)) == 200
        assert post(url, body, sign(body, secret="not-the-secret")) == 401
        assert post(url, body, sign(body, timestamp=int(time.time()) - 600)) == 401
        assert any(
            c.method == "auth.test" and c.token == BOT_TOKEN for c in fake_slack.calls
        )  # token verified at start
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    _, err = process.communicate()
    assert f"listening for Slack on http://127.0.0.1:{port}/slack/events" in err
    assert BOT_TOKEN not in err and SIGNING_SECRET not in err


def test_serve_uses_socket_mode_when_an_app_token_is_set(tmp_path, fake_slack):
    process = spawn(
        serve_settings(tmp_path, fake_slack.api_url, SLACK_APP_TOKEN="xapp-fake-app-token", SLACK_SIGNING_SECRET=None)
    )
    try:
        fake_slack.wait_for(
            lambda: fake_slack.calls_of("apps.connections.open"), timeout=30, what="apps.connections.open"
        )
        assert fake_slack.calls_of("apps.connections.open")[0].token == "xapp-fake-app-token"
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"SLACK_SIGNING_SECRET": None}, "neither SLACK_APP_TOKEN (Socket Mode"),
        ({"SLACK_BOT_TOKEN": "xoxb-wrong"}, "Slack rejected the bot token (invalid_auth)"),
    ],
)
def test_serve_refuses_unusable_settings_clearly(tmp_path, fake_slack, overrides, message):
    process = spawn(serve_settings(tmp_path, fake_slack.api_url, **overrides), "--port", str(free_port()))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert message in err and "Traceback" not in err
    assert "xoxb-wrong" not in err
