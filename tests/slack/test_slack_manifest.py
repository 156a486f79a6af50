"""The Slack app manifest asks for what the code uses — no more, no less in the ways that matter."""

from __future__ import annotations

import json
import re

from bot.config import REPO_ROOT

# Every Web API method kbbot calls → the bot scopes it needs (all of them: e.g. history of every conversation
# type kbbot answers in). Slack's method pages list them; a method missing here fails the tests below.
METHOD_SCOPES: dict[str, frozenset[str]] = {
    "auth.test": frozenset(),  # Bolt, at start-up
    "chat.postMessage": frozenset({"chat:write"}),
    "chat.postEphemeral": frozenset({"chat:write"}),
    "chat.update": frozenset({"chat:write"}),
    "chat.startStream": frozenset({"chat:write"}),
    "chat.appendStream": frozenset({"chat:write"}),
    "chat.stopStream": frozenset({"chat:write"}),
    "assistant.threads.setStatus": frozenset({"assistant:write"}),
    "assistant.threads.setSuggestedPrompts": frozenset({"assistant:write"}),
    "assistant.threads.setTitle": frozenset({"assistant:write"}),
    "reactions.add": frozenset({"reactions:write"}),
    "conversations.replies": frozenset({"channels:history", "groups:history", "im:history", "mpim:history"}),
    "conversations.history": frozenset({"channels:history", "groups:history", "im:history", "mpim:history"}),
    "conversations.members": frozenset({"channels:read", "groups:read"}),
    "files.info": frozenset({"files:read"}),
    "views.open": frozenset(),  # needs a trigger_id, no scope
    "views.publish": frozenset(),  # the Home tab, no scope
    "users.info": frozenset({"users:read"}),  # the uploader's name in Sources
}

# Bolt's listener utilities kbbot calls, and the Web API methods behind them.
BOLT_UTILITIES = {
    "say": {"chat.postMessage"},
    "say_stream": {"chat.startStream", "chat.appendStream", "chat.stopStream"},
    "set_suggested_prompts": {"assistant.threads.setSuggestedPrompts"},
    "set_status": {"assistant.threads.setStatus"},
    "set_title": {"assistant.threads.setTitle"},
    "App": {"auth.test"},
}

_CLIENT_CALL = re.compile(r"\bclient\.([a-z]+(?:_[A-Za-z]+)+)\(")
_UTILITY_CALL = re.compile(r"(?<![\w.])(" + "|".join(BOLT_UTILITIES) + r")\(")


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
    allowed_writes = {"chat:write", "reactions:write", "im:write", "assistant:write"}
    assert not {s for s in scopes if s.endswith(":write") and s not in allowed_writes}


def manifest_scopes() -> set[str]:
    return set(manifest()["oauth_config"]["scopes"]["bot"])


def methods_in_code() -> dict[str, set[str]]:
    """Web API method → the files calling it: `client.<method>(…)` calls and Bolt's utilities."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO_ROOT / "bot" / "slack").rglob("*.py")):  # the only code importing slack_sdk/bolt
        source = path.read_text()
        assert ".api_call(" not in source, f"{path}: name the method (client.<method>) so its scope is checked"
        methods = {m.replace("_", ".") for m in _CLIENT_CALL.findall(source)}
        methods |= {m for name in _UTILITY_CALL.findall(source) for m in BOLT_UTILITIES[name]}
        for method in methods:
            found.setdefault(method, set()).add(str(path.relative_to(REPO_ROOT)))
    return found


def test_only_the_slack_surface_talks_to_slack():
    outside = [
        str(p.relative_to(REPO_ROOT))
        for p in (REPO_ROOT / "bot").rglob("*.py")
        if "slack" not in p.relative_to(REPO_ROOT / "bot").parts[:1]
        and re.search(r"^\s*(from|import) slack_(sdk|bolt)", p.read_text(), re.M)
    ]
    assert not outside, f"Web API calls outside bot/slack escape the scope check: {outside}"


def test_every_web_api_method_in_the_code_needs_only_declared_scopes():
    found = methods_in_code()
    assert {"chat.postMessage", "assistant.threads.setSuggestedPrompts", "assistant.threads.setTitle"} <= set(found)
    unmapped = {m: files for m, files in found.items() if m not in METHOD_SCOPES}
    assert not unmapped, f"add these methods and their scopes to METHOD_SCOPES (and manifest.json): {unmapped}"
    missing = {m: METHOD_SCOPES[m] - manifest_scopes() for m in found if METHOD_SCOPES[m] - manifest_scopes()}
    assert not missing, f"manifest.json lacks scopes these methods need: {missing}"


def test_the_scope_check_catches_a_method_added_without_its_scope(tmp_path):
    """The check above is not vacuous: a new call is found, and an undeclared scope is reported."""
    assert _CLIENT_CALL.findall("client.bookmarks_add(channel_id=c)") == ["bookmarks_add"]
    assert _UTILITY_CALL.findall("    set_title(title)\n    deps.set_title(x)") == ["set_title"]
    assert "bookmarks.add" not in METHOD_SCOPES
    scopes = manifest_scopes() - {"assistant:write"}
    assert METHOD_SCOPES["assistant.threads.setTitle"] - scopes == {"assistant:write"}


def test_manifest_declares_the_assistant_pane():
    data = manifest()
    view = data["features"]["assistant_view"]
    assert view["assistant_description"].strip()
    assert 1 <= len(view["suggested_prompts"]) <= 4
    assert all(p["title"].strip() and p["message"].strip() for p in view["suggested_prompts"])
    events = set(data["settings"]["event_subscriptions"]["bot_events"])
    assert {"assistant_thread_started", "assistant_thread_context_changed", "message.im"} <= events
    assert {"assistant:write", "im:history"} <= manifest_scopes()
