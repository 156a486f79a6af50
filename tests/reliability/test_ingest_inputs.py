"""What `kbbot ingest` and `kbbot kb sync` take in: files that are not documents inside a folder are
skipped and listed (not failures); several paths are named relative to their common parent, so a
Sphinx/MkDocs-like tree with an index.html per folder ingests in one command (single files and single
folders keep their names); and `kb sync` removes the documents it ingested from docs/ once their file is
gone (never uploads or `kbbot ingest`ed documents), unless told --keep-missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.service import KnowledgeService

KB = "docs"


def _page(title: str, text: str) -> str:
    return f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{text}</p></main></body></html>"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A built documentation site: an index.html in several folders, assets, a hidden build cache."""
    root = tmp_path / "site"
    pages = {
        "index.html": ("Home", "Welcome to the Lumen Dispatch documentation."),
        "faq/index.html": ("FAQ", "Invoices are issued on the first business day of the month."),
        "tutorial/index.html": ("Tutorial", "Create a route, then assign a driver to it."),
        "api/v2/index.html": ("API v2", "The v2 API paginates with a cursor parameter."),
    }
    for name, (title, text) in pages.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(_page(title, text), encoding="utf-8")
    (root / "_static").mkdir()
    (root / "_static" / "style.css").write_text("body { margin: 0 }", encoding="utf-8")
    (root / "_static" / "search.js").write_text("var x = 1;", encoding="utf-8")
    (root / "objects.inv").write_bytes(b"# Sphinx inventory\x00\x01")
    (root / ".doctrees").mkdir()
    (root / ".doctrees" / "index.doctree").write_bytes(b"\x80\x04binary")
    return root


def test_a_site_with_an_index_html_per_folder_ingests_in_one_command(settings, site: Path, run_cli) -> None:
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "Product documentation site")
    result = run_cli(settings, "ingest", "--kb", KB, str(site), "--json")
    assert result.code == 0, result.out + result.err
    documents = {d["document"]: d for d in json.loads(result.out)["documents"]}
    assert {n for n, d in documents.items() if d["status"] == "ready"} == {
        "index.html",
        "faq/index.html",
        "tutorial/index.html",
        "api/v2/index.html",
    }
    skipped = {n: d["reason"] for n, d in documents.items() if d["status"] == "skipped"}
    assert set(skipped) == {"_static/style.css", "_static/search.js", "objects.inv"}  # hidden .doctrees: silent
    assert "unsupported file type '.css'" in skipped["_static/style.css"]
    assert all("reason" not in d for d in documents.values() if d["status"] == "ready")

    text = run_cli(settings, "ingest", "--kb", KB, str(site))
    assert text.code == 0
    assert "- docs/_static/style.css: skipped: unsupported file type '.css'" in text.out
    assert "4 ok, 0 failed, 3 skipped" in text.out and "error:" not in text.err


def test_several_files_are_named_relative_to_their_common_parent(settings, site: Path, run_cli) -> None:
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "Product documentation site")
    result = run_cli(
        settings,
        "ingest",
        "--kb",
        KB,
        str(site / "faq" / "index.html"),
        str(site / "tutorial" / "index.html"),
        "--json",
    )
    assert result.code == 0, result.out
    assert {(d["document"], d["status"]) for d in json.loads(result.out)["documents"]} == {
        ("faq/index.html", "ready"),
        ("tutorial/index.html", "ready"),
    }
    # Two folders: named relative to their common parent as well.
    again = run_cli(settings, "ingest", "--kb", KB, str(site / "faq"), str(site / "api"), "--json")
    assert {(d["document"], d["status"]) for d in json.loads(again.out)["documents"]} == {
        ("faq/index.html", "unchanged"),
        ("api/v2/index.html", "ready"),
    }


def test_single_file_and_single_folder_names_are_unchanged(service: KnowledgeService, site: Path) -> None:
    service.create_kb(KB, "Product documentation site")
    one = service.ingest(KB, [site / "faq" / "index.html"])
    assert [(d.document, d.status) for d in one.documents] == [("index.html", "ready")]
    folder = service.ingest(KB, [site / "api"])
    assert [(d.document, d.status) for d in folder.documents] == [("v2/index.html", "ready")]
    assert [(d.document, d.status) for d in service.ingest(KB, [site / "api"]).documents] == [
        ("v2/index.html", "unchanged")
    ]


def test_an_unsupported_file_named_explicitly_is_still_an_error(settings, site: Path, run_cli) -> None:
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb(KB, "Product documentation site")
    result = run_cli(settings, "ingest", "--kb", KB, str(site / "_static" / "style.css"))
    assert result.code == 1
    assert "error: style.css: unsupported file type '.css'" in result.err


# --- kb sync and documents whose file left docs/ -------------------------------------------------


@pytest.fixture
def declared(tmp_path: Path) -> Path:
    kbs = tmp_path / "knowledge_bases"
    docs = kbs / "handbook" / "docs"
    docs.mkdir(parents=True)
    (kbs / "handbook" / "kb.toml").write_text(
        'name = "handbook"\ndescription = "The staff handbook: leave, expenses, the office."\n', encoding="utf-8"
    )
    for name, text in (
        ("leave.md", "Everyone gets 25 days of annual leave."),
        ("expenses.md", "Submit receipts within 30 days."),
        ("office.md", "The office opens at 8 am."),
    ):
        (docs / name).write_text(f"# {name[:-3].title()}\n\n{text}\n", encoding="utf-8")
    return kbs


def _sync(settings, run_cli, *flags: str) -> dict[str, tuple[str, str | None]]:
    result = run_cli(settings, "kb", "sync", "--json", *flags)
    assert result.code == 0, result.err
    (report,) = json.loads(result.out)["kbs"]
    return {d["document"]: (d["status"], d.get("reason")) for d in report["documents"]}


def test_sync_removes_what_left_docs_and_nothing_else(make_settings, declared: Path, tmp_path: Path, run_cli) -> None:
    settings = make_settings(KBBOT_KNOWLEDGE_BASES_DIR=declared)
    docs = declared / "handbook" / "docs"
    assert {s for s, _ in _sync(settings, run_cli).values()} == {"ready"}
    with KnowledgeService(settings.tools) as svc:  # documents from elsewhere, named like docs/ files would be
        assert svc.ingest_bytes(
            "handbook", "uploaded.md", b"# Uploaded\n\nFrom Slack.\n", source_url="https://files.slack.example/F1"
        ).ok
        cli_file = tmp_path / "elsewhere" / "cli.md"
        cli_file.parent.mkdir()
        cli_file.write_text("# CLI\n\nIngested by hand.\n", encoding="utf-8")
        assert svc.ingest("handbook", [cli_file]).ok

    (docs / "expenses.md").unlink()
    statuses = _sync(settings, run_cli)
    assert statuses["expenses.md"] == ("removed", "its file is no longer in docs/")
    assert {n for n, (s, _) in statuses.items() if s == "unchanged"} == {"leave.md", "office.md"}
    with KnowledgeService(settings.tools) as svc:
        names = {d.name for d in svc.store.registry.list_documents("handbook")}
        assert names == {"leave.md", "office.md", "uploaded.md", "cli.md"}
        assert "receipts" not in " ".join(c.text for c in svc.store.live_chunks("handbook"))
        assert not svc.store.keyword_index("handbook").search("receipts", 5)

    (docs / "office.md").unlink()
    kept = _sync(settings, run_cli, "--keep-missing")
    assert kept["office.md"] == ("missing", "its file is no longer in docs/; kept (--keep-missing)")
    text = run_cli(settings, "kb", "sync", "--keep-missing")
    assert "? handbook/office.md: missing" in text.out and "1 missing" in text.out
    with KnowledgeService(settings.tools) as svc:
        assert "office.md" in {d.name for d in svc.store.registry.list_documents("handbook")}

    removed = run_cli(settings, "kb", "sync")
    assert removed.code == 0 and "handbook/office.md: removed: its file is no longer in docs/" in removed.out
    assert "1 removed" in removed.out
    with KnowledgeService(settings.tools) as svc:
        assert {d.name for d in svc.store.registry.list_documents("handbook")} == {"leave.md", "uploaded.md", "cli.md"}


def test_sync_adopts_documents_synced_before_origins_were_recorded(make_settings, declared: Path, run_cli) -> None:
    settings = make_settings(KBBOT_KNOWLEDGE_BASES_DIR=declared)
    _sync(settings, run_cli)
    with KnowledgeService(settings.tools) as svc:  # as a registry written before the origin column looks
        svc.store.registry.set_origin("handbook", ["leave.md", "office.md", "expenses.md"], None)
    assert {s for s, _ in _sync(settings, run_cli).values()} == {"unchanged"}  # adopted, nothing removed
    (declared / "handbook" / "docs" / "leave.md").unlink()
    assert _sync(settings, run_cli)["leave.md"][0] == "removed"
