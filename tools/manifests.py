"""Declared knowledge bases: `knowledge_bases/<name>/kb.toml` plus a `docs/` folder."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

KB_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{1,62}$")


class ManifestError(ValueError):
    """A kb.toml that cannot be used; the message names the file."""


@dataclass(frozen=True)
class KnowledgeBaseManifest:
    name: str
    description: str
    channels: tuple[str, ...] = ()
    visibility: Literal["public", "restricted"] = "public"
    allowed_channels: tuple[str, ...] = ()
    uploaders: tuple[str, ...] = ()
    docs_dir: Path | None = field(default=None, compare=False)

    @property
    def restricted(self) -> bool:
        return self.visibility == "restricted"

    def visible_in(self, channel_id: str | None) -> bool:
        """Whether the KB may be searched/cited in this channel (None: a local, trusted surface)."""
        if not self.restricted or channel_id is None:
            return True
        return channel_id in self.allowed_channels

    def may_upload(self, user_id: str) -> bool:
        return user_id in self.uploaders


def validate_kb_name(name: str) -> str:
    if not KB_NAME_PATTERN.match(name):
        raise ManifestError(
            f"invalid knowledge base name {name!r}: use 2-63 lowercase letters, digits, '-' or '_'"
        )
    return name


def load_manifest(path: Path) -> KnowledgeBaseManifest:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: {exc}") from exc
    try:
        name = validate_kb_name(str(data["name"]))
        description = str(data["description"]).strip()
    except KeyError as exc:
        raise ManifestError(f"{path}: missing key {exc.args[0]!r}") from exc
    visibility = data.get("visibility", "public")
    if visibility not in ("public", "restricted"):
        raise ManifestError(f"{path}: visibility must be 'public' or 'restricted', not {visibility!r}")
    return KnowledgeBaseManifest(
        name=name,
        description=description,
        channels=tuple(data.get("channels", ())),
        visibility=visibility,
        allowed_channels=tuple(data.get("allowed_channels", ())),
        uploaders=tuple(data.get("uploaders", ())),
        docs_dir=path.parent / "docs",
    )


def discover_manifests(root: Path) -> list[KnowledgeBaseManifest]:
    """Every `*/kb.toml` under root, sorted by name."""
    if not root.is_dir():
        return []
    return sorted((load_manifest(p) for p in root.glob("*/kb.toml")), key=lambda m: m.name)
