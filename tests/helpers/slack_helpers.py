"""Helpers for the Slack tests and the latency measurement: sign and send what Slack sends."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlencode

from helpers.fake_slack import BOT_USER, TEAM, FakeSlack

SIGNING_SECRET = "kbbot-test-signing-secret"
APP_ID = "A0KBBOT0001"
FINANCE_MEMBERS = ["U0CFO00001", "U0ADMIN001", "U0FINANCE9"]

_ids = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}{int(time.time() * 1000) % 10**8:08d}{next(_ids):05d}"


def sign(body: str, timestamp: int | None = None, secret: str = SIGNING_SECRET) -> dict[str, str]:
    """Slack's request signing: v0=HMAC-SHA256(secret, 'v0:{timestamp}:{body}')."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    base = f"v0:{timestamp}:{body}".encode()
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={digest}"}


@dataclass
class Response:
    status: int
    body: str
    elapsed_s: float

    def json(self) -> dict:
        return json.loads(self.body) if self.body else {}


class SlackSender:
    """Sends what Slack sends: signed Events API, slash command and interactivity requests."""

    def __init__(self, url: str, fake: FakeSlack):
        self.url, self.fake = url, fake

    def post(
        self,
        body: str,
        content_type: str,
        headers: dict | None = None,
        signed: bool = True,
        timestamp: int | None = None,
    ) -> Response:
        all_headers = {"Content-Type": content_type, **(sign(body, timestamp) if signed else {}), **(headers or {})}
        request = urllib.request.Request(self.url, data=body.encode(), headers=all_headers, method="POST")
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return Response(response.status, response.read().decode(), time.perf_counter() - started)
        except urllib.error.HTTPError as exc:
            return Response(exc.code, exc.read().decode(), time.perf_counter() - started)

    # --- Events API ---------------------------------------------------------------------------

    def envelope(self, event: dict, event_id: str | None = None) -> dict:
        return {
            "token": "legacy-verification-token",
            "team_id": TEAM,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or unique("Ev"),
            "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True, "enterprise_id": None}],
            "is_ext_shared_channel": False,
        }

    def event(self, event: dict, event_id: str | None = None, retry_num: int | None = None, **kwargs) -> Response:
        headers = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"} if retry_num else {}
        body = json.dumps(self.envelope(event, event_id))
        return self.post(body, "application/json", headers=headers, **kwargs)

    def mention(
        self, channel: str, user: str, text: str, thread_ts: str | None = None, **kwargs
    ) -> tuple[dict, Response]:
        """A user @mentions the bot: the message lands in Slack (the fake), then the event is delivered."""
        message = self.fake.add_message(channel, user, f"<@{BOT_USER}> {text}", thread_ts=thread_ts)
        event = {
            "type": "app_mention",
            "user": user,
            "text": message["text"],
            "ts": message["ts"],
            "channel": channel,
            "event_ts": message["ts"],
            "team": TEAM,
            **({"thread_ts": thread_ts} if thread_ts else {}),
        }
        return message, self.event(event, **kwargs)

    def message(
        self, channel: str, user: str, text: str, thread_ts: str | None = None, channel_type: str = "channel", **extra
    ) -> tuple[dict, Response]:
        message = self.fake.add_message(channel, user, text, thread_ts=thread_ts, **extra)
        event = {
            "type": "message",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": message["ts"],
            "event_ts": message["ts"],
            "channel_type": channel_type,
            "team": TEAM,
            **extra,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        return message, self.event(event)

    def dm(self, user: str, text: str, thread_ts: str | None = None, **extra) -> tuple[dict, Response]:
        return self.message(dm_channel(user), user, text, thread_ts=thread_ts, channel_type="im", **extra)

    # --- the assistant pane -------------------------------------------------------------------

    def pane_thread_started(self, user: str, context_channel: str | None = None) -> tuple[str, str, Response]:
        """The user opens the assistant pane (looking at `context_channel`): Slack makes the thread's root in
        the app's DM and sends assistant_thread_started. Returns (DM channel, thread_ts, response)."""
        channel = dm_channel(user)
        root = self.fake.add_message(channel, user, "", subtype="assistant_app_thread")
        context = {"channel_id": context_channel, "team_id": TEAM, "enterprise_id": None} if context_channel else {}
        event = {
            "type": "assistant_thread_started",
            "assistant_thread": {
                "user_id": user,
                "context": context,
                "channel_id": channel,
                "thread_ts": root["ts"],
            },
            "event_ts": self.fake.next_ts(),
        }
        return channel, root["ts"], self.event(event)

    def pane_context_changed(self, user: str, thread_ts: str, context_channel: str) -> Response:
        event = {
            "type": "assistant_thread_context_changed",
            "assistant_thread": {
                "user_id": user,
                "context": {"channel_id": context_channel, "team_id": TEAM, "enterprise_id": None},
                "channel_id": dm_channel(user),
                "thread_ts": thread_ts,
            },
            "event_ts": self.fake.next_ts(),
        }
        return self.event(event)

    def pane_message(self, user: str, thread_ts: str, text: str, **extra) -> tuple[dict, Response]:
        """A message the user types in a pane thread (a threaded DM message, as Slack sends it)."""
        return self.message(
            dm_channel(user), user, text, thread_ts=thread_ts, channel_type="im", parent_user_id=BOT_USER, **extra
        )

    # --- slash commands and interactivity -----------------------------------------------------

    def command(self, text: str, user: str, channel: str) -> tuple[Response, str, str]:
        response_id, trigger_id = unique("R"), unique("trig.")
        form = {
            "token": "legacy",
            "team_id": TEAM,
            "team_domain": "lumen",
            "channel_id": channel,
            "channel_name": "x",
            "user_id": user,
            "user_name": user.lower(),
            "command": "/kb",
            "text": text,
            "api_app_id": APP_ID,
            "response_url": f"{self.fake.base}/response/{response_id}",
            "trigger_id": trigger_id,
        }
        return self.post(urlencode(form), "application/x-www-form-urlencoded"), response_id, trigger_id

    def interaction(self, payload: dict) -> Response:
        return self.post(urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded")

    def responses(self, response_id: str) -> list[dict]:
        return [c.params for c in self.fake.calls_of("response_url") if c.params.get("id") == response_id]


def dm_channel(user: str) -> str:
    return "D" + user[1:]
