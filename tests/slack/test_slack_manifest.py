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
        "users:read",  # users.info: speakers' names in a thread saved to a KB
    }
    assert needed <= scopes
    assert not {s for s in scopes if s.endswith(":write") and s not in {"chat:write", "reactions:write", "im:write"}}


def test_manifest_declares_the_message_shortcuts_the_bot_listens_for():
    from bot.slack.shortcut_views import ASK_SHORTCUT_ID, SAVE_SHORTCUT_ID

    shortcuts = {s["callback_id"]: s for s in manifest()["features"]["shortcuts"]}
    assert set(shortcuts) == {ASK_SHORTCUT_ID, SAVE_SHORTCUT_ID}
    for shortcut in shortcuts.values():
        assert shortcut["type"] == "message"
        assert len(shortcut["name"]) <= 24 and len(shortcut["description"]) <= 80  # Slack's limits
    assert "commands" in manifest()["oauth_config"]["scopes"]["bot"]  # shortcuts need it, as /kb does
    assert "channel" in manifest()["features"]["slash_commands"][0]["usage_hint"]
