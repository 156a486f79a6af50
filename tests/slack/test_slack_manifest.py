"""The Slack app manifest asks for what the code uses — no more, no less in the ways that matter."""

from __future__ import annotations

import json

from bot.config import REPO_ROOT


def manifest() -> dict:
    return json.loads((REPO_ROOT / "manifest.json").read_text())


def test_manifest_declares_events_command_interactivity_and_socket_mode():
    data = manifest()
    settings = data["settings"]
    assert {"app_mention", "message.channels", "message.groups", "message.im"} <= set(
        settings["event_subscriptions"]["bot_events"]
    )
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["socket_mode_enabled"] is True
    [command] = data["features"]["slash_commands"]
    assert command["command"] == "/kb" and command["url"].endswith("/slack/events")
    assert settings["event_subscriptions"]["request_url"].endswith("/slack/events")
    assert data["features"]["app_home"]["messages_tab_enabled"] is True
    assert data["features"]["app_home"]["messages_tab_read_only_enabled"] is False  # people can DM the bot


def test_manifest_enables_the_home_tab_and_its_event():
    data = manifest()
    assert data["features"]["app_home"]["home_tab_enabled"] is True  # views.publish needs it (no scope)
    assert "app_home_opened" in data["settings"]["event_subscriptions"]["bot_events"]


def test_manifest_bot_scopes_cover_the_api_methods_used():
    scopes = set(manifest()["oauth_config"]["scopes"]["bot"])
    needed = {
        "app_mentions:read",  # app_mention
        "chat:write",  # postMessage, streams, setStatus, postEphemeral, update
        "commands",  # /kb
        "files:read",  # files.info, url_private downloads
        "reactions:write",  # :eyes:
        "channels:history",
        "groups:history",
        "im:history",  # message events, conversations.replies/history
        "channels:read",
        "groups:read",  # conversations.members for restricted KBs
    }
    assert needed <= scopes
    assert not {s for s in scopes if s.endswith(":write") and s not in {"chat:write", "reactions:write", "im:write"}}
