"""Which knowledge bases exist, and who may change them — as the Slack surface needs it."""

from __future__ import annotations

from dataclasses import replace

from bot.slack.render import escape


def all_manifests(runtime) -> dict:  # noqa: ANN001
    """Every KB: in the store, or declared in knowledge_bases/ and not yet synced (created on first upload).
    Admins (KBBOT_ADMIN_USERS) are uploaders of all of them."""
    service, admins = runtime.service, runtime.settings.admin_user_ids
    result = {}
    for name, manifest in service.declared().items():
        result[name] = replace(manifest, uploaders=tuple(dict.fromkeys(manifest.uploaders + admins)))
    result.update(service.manifests())
    return result


def uploaders_text(manifest) -> str:  # noqa: ANN001
    people = [f"<@{u}>" for u in manifest.uploaders]
    return ", ".join(people) if people else "nobody yet (set `uploaders` in its kb.toml, or KBBOT_ADMIN_USERS)"


def refusal(kb: str, manifest) -> str:  # noqa: ANN001
    return f":no_entry: Only the uploaders of `{escape(kb)}` can add or delete its documents: {uploaders_text(manifest)}."
