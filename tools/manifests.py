"""Declared knowledge bases: `knowledge_bases/<name>/kb.toml` plus a `docs/` folder."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

KNOWN_KEYS = frozenset({"name", "description", "channels", "visibility", "allowed_channels", "uploaders"})
KB_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{1,62}$")


class ManifestError(ValueError):
    """A kb.toml that cannot be used; the message names the file."""

    def __init__(self, message: str, path: Path | None = None):
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class KnowledgeBaseManifest:
    name: str
    description: str
    channels: tuple[str, ...] = ()
    visibility: Literal["public", "restricted"] = "public"
    allowed_channels: tuple[str, ...] = ()
    uploaders: tuple[str, ...] = ()
    docs_dir: Path | None = field(default=None, compare=False)
    # Whether the file says `visibility` (a restricted KB turns public only when its kb.toml says so).
    visibility_declared: bool = field(default=True, compare=False)

    @property
    def restricted(self) -> bool:
        return self.visibility == "restricted"


def validate_kb_name(name: str) -> str:
    if not KB_NAME_PATTERN.match(name):
        raise ManifestError(f"invalid knowledge base name {name!r}: use 2-63 lowercase letters, digits, '-' or '_'")
    return name


def load_manifest(path: Path) -> KnowledgeBaseManifest:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: {exc}", path) from exc
    try:
        name = validate_kb_name(str(data["name"]))
        description = str(data["description"]).strip()
    except KeyError as exc:
        raise ManifestError(f"{path}: missing key {exc.args[0]!r}", path) from exc
    except ManifestError as exc:
        raise ManifestError(f"{path}: {exc}", path) from exc
    if not description:
        raise ManifestError(f"{path}: 'description' is empty (the router reads it to pick this KB)", path)
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:  # a misspelt `visiblity = "restricted"` must not leave the KB public
        raise ManifestError(
            f"{path}: unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(KNOWN_KEYS))}", path
        )
    visibility = data.get("visibility", "public")
    if visibility not in ("public", "restricted"):
        raise ManifestError(f"{path}: visibility must be 'public' or 'restricted', not {visibility!r}", path)
    return KnowledgeBaseManifest(
        name=name,
        description=description,
        channels=_string_list(data, "channels", path),
        visibility=visibility,
        allowed_channels=_string_list(data, "allowed_channels", path),
        uploaders=_string_list(data, "uploaders", path),
        docs_dir=path.parent / "docs",
        visibility_declared="visibility" in data,
    )


def _string_list(data: dict, key: str, path: Path) -> tuple[str, ...]:
    """A list of strings; `channels = "C123"` would otherwise become ('C', '1', '2', '3')."""
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ManifestError(f'{path}: {key!r} must be a list of strings, like ["C0123456789"]', path)
    return tuple(v.strip() for v in value if v.strip())


def discover_manifests(
    root: Path, on_error: Callable[[ManifestError], None] | None = None
) -> list[KnowledgeBaseManifest]:
    """Every `*/kb.toml` under root, sorted by name.

    A broken manifest raises ManifestError, or, with `on_error`, is reported to it and skipped so the other
    KBs stay usable. Two files declaring one name are both broken: neither may decide that KB's rules (a copy
    of a restricted KB's kb.toml made public under the same name must not make it public).
    """
    if not root.is_dir():
        return []
    found: dict[str, list[KnowledgeBaseManifest]] = {}
    for path in sorted(root.glob("*/kb.toml")):
        try:
            manifest = load_manifest(path)
        except ManifestError as exc:
            if on_error is None:
                raise
            on_error(exc)
            continue
        found.setdefault(manifest.name, []).append(manifest)
    usable = []
    for name, manifests in sorted(found.items()):
        if len(manifests) == 1:
            usable.append(manifests[0])
            continue
        places = ", ".join(str(m.docs_dir.parent / "kb.toml") for m in manifests if m.docs_dir)
        for manifest in manifests:
            path = manifest.docs_dir.parent / "kb.toml" if manifest.docs_dir else None
            exc = ManifestError(f"{path}: knowledge base {name!r} is declared more than once ({places})", path)
            if on_error is None:
                raise exc
            on_error(exc)
    return usable
