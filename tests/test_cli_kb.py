"""The `kbbot kb ...` / `kbbot ingest` command line on the sample KBs: the acceptance numbers, the JSON
contracts, idempotent sync (no embedding model loaded when nothing changed), create/delete-doc/list."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.cli import child_env

from bot.config import Settings
from tools.service import KnowledgeService

CJK = re.compile(r"[\u4e00-\u9fff]")


def test_sample_sync_meets_the_acceptance_bar(sample_sync_json: dict, sample_settings: Settings) -> None:
    reports = {r["kb"]: r for r in sample_sync_json["kbs"]}
    assert len(reports) >= 3
    for kb in ("people", "engineering", "product"):
        ready = [d for d in reports[kb]["documents"] if d["status"] == "ready"]
        assert len(ready) >= 5, kb
        assert all(d["chunks"] > 0 and d["error"] is None for d in ready)
    for report in reports.values():
        assert set(report) == {"kb", "documents", "embedded_chunks"}
        for doc in report["documents"]:
            assert set(doc) == {"document", "status", "chunks", "error"}
    formats = {Path(d["document"]).suffix for r in reports.values() for d in r["documents"] if d["status"] == "ready"}
    assert {".md", ".html", ".pdf", ".docx"} <= formats
    assert sample_sync_json["embedded_chunks"] == sum(r["embedded_chunks"] for r in reports.values()) > 200

    with KnowledgeService(sample_settings.tools) as svc:
        chinese = [c for c in svc.store.live_chunks("people") if CJK.search(c.text)]
        assert {c.document for c in chinese} >= {"shanghai-expense-policy-zh.md", "shanghai-office-guide-zh.docx"}
        hits = svc.store.keyword_index("people").search("报销", 5)
        assert hits and any("-zh." in cid for cid, _ in hits)


def test_kb_list_json_contract(sample_settings: Settings, run_cli) -> None:
    result = run_cli(sample_settings, "kb", "list", "--json")
    assert result.code == 0
    listed = json.loads(result.out)
    assert [kb["name"] for kb in listed] == sorted(kb["name"] for kb in listed)
    for kb in listed:
        assert set(kb) == {
            "name",
            "description",
            "documents",
            "ready_documents",
            "chunks",
            "embedding_model",
            "visibility",
            "problem",
            "channels",
        }
        assert kb["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"
        assert kb["documents"] == kb["ready_documents"] >= 4 and kb["chunks"] > kb["documents"]
    human = run_cli(sample_settings, "kb", "list")
    assert human.code == 0 and re.search(r"^people: \d+/\d+ documents ready, \d+ chunks — HR", human.out, re.M)
    assert {kb["name"]: kb["channels"] for kb in listed}["people"] == ["C0PEOPLE01"]  # its kb.toml's
    assert "  searched first in: C0PEOPLE01" in human.out


def test_second_sync_reports_zero_embeddings_without_loading_the_model(sample_settings: Settings) -> None:
    """A real process: `kbbot kb sync --json` again. The embedding model is booby-trapped in that
    process, so merely loading it would fail the run."""
    script = textwrap.dedent(
        """
        import sys
        import tools.embeddings as embeddings
        import tools.onnx_minilm as onnx_minilm

        def trap(*args, **kwargs):
            raise SystemExit("the embedding model was loaded although nothing changed")

        embeddings.LocalMiniLM.__init__ = trap
        onnx_minilm.OnnxMiniLM.__init__ = trap
        embeddings.OpenAIEmbedder.__init__ = trap
        from bot.cli import main
        sys.exit(main(["kb", "sync", "--json"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=child_env(sample_settings),
        cwd=str(sample_settings.data_dir.parent),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["embedded_chunks"] == 0
    assert {d["status"] for r in out["kbs"] for d in r["documents"]} == {"unchanged"}


def test_sync_picks_up_only_what_changed(make_settings, synced_data_dir: Path, tmp_path: Path, run_cli) -> None:
    kbs = tmp_path / "knowledge_bases"
    shutil.copytree(Path(__file__).resolve().parent.parent / "knowledge_bases", kbs)
    data = tmp_path / "data"
    shutil.copytree(synced_data_dir, data)
    settings = make_settings(data, KBBOT_KNOWLEDGE_BASES_DIR=kbs)
    (kbs / "product" / "docs" / "status-page.md").write_text(
        "# Status page\n\nIncidents are posted at status.lumen.example within 10 minutes.\n", encoding="utf-8"
    )
    result = run_cli(settings, "kb", "sync", "--json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    changed = {
        (r["kb"], d["document"]): d["status"] for r in out["kbs"] for d in r["documents"] if d["status"] != "unchanged"
    }
    assert changed == {("product", "status-page.md"): "ready"}
    assert out["embedded_chunks"] == 1


def test_sync_reports_a_broken_manifest_clearly(make_settings, tmp_path: Path, run_cli) -> None:
    kbs = tmp_path / "knowledge_bases"
    (kbs / "broken" / "docs").mkdir(parents=True)
    (kbs / "broken" / "kb.toml").write_text('name = "broken"\n', encoding="utf-8")
    result = run_cli(make_settings(KBBOT_KNOWLEDGE_BASES_DIR=kbs), "kb", "sync", "--json")
    assert result.code == 1
    assert result.err.strip() == f"error: {kbs / 'broken' / 'kb.toml'}: missing key 'description'"


def test_kb_create_then_ingest_and_delete_doc(settings: Settings, tmp_path: Path, run_cli) -> None:
    assert run_cli(settings, "kb", "create", "legal", "--description", "Contracts and NDAs").code == 0
    names = {kb["name"]: kb for kb in json.loads(run_cli(settings, "kb", "list", "--json").out)}
    assert names["legal"]["description"] == "Contracts and NDAs" and names["legal"]["documents"] == 0

    doc = tmp_path / "nda.md"
    doc.write_text("# NDA\n\nMutual NDAs last 3 years from signature.\n", encoding="utf-8")
    result = run_cli(settings, "ingest", "--kb", "legal", str(doc), "--json")
    assert result.code == 0
    assert json.loads(result.out) == {
        "kb": "legal",
        "documents": [{"document": "nda.md", "status": "ready", "chunks": 1, "error": None}],
        "embedded_chunks": 1,
    }
    human = run_cli(settings, "ingest", "--kb", "legal", str(doc))
    assert human.code == 0 and "= legal/nda.md: unchanged" in human.out

    result = run_cli(settings, "kb", "delete-doc", "--kb", "legal", "nda.md")
    assert (result.code, result.out.strip()) == (0, "deleted legal/nda.md")
    legal = {kb["name"]: kb for kb in json.loads(run_cli(settings, "kb", "list", "--json").out)}["legal"]
    assert (legal["documents"], legal["chunks"]) == (0, 0)

    missing = run_cli(settings, "kb", "delete-doc", "--kb", "legal", "nda.md")
    assert missing.code == 1 and missing.err.strip() == "error: no document 'nda.md' in 'legal' (documents: none)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["kb", "create", "Bad Name", "--description", "x"], "invalid knowledge base name 'Bad Name'"),
        (["kb", "create", "ok-name", "--description", "  "], "needs a description"),
        (["kb", "delete-doc", "--kb", "nope", "a.md"], "no knowledge base named 'nope'"),
        (["kb", "reindex", "nope"], "no knowledge base named 'nope'"),
    ],
)
def test_kb_command_errors_are_one_line(settings: Settings, run_cli, args: list[str], message: str) -> None:
    result = run_cli(settings, *args)
    assert result.code == 1
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.err


def _declare(root: Path, folder: str, body: str) -> Path:
    (root / folder / "docs").mkdir(parents=True, exist_ok=True)
    path = root / folder / "kb.toml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('name = "ops"\ndescription = "Ops"\nchannels = "C0OPS00001"\n', "'channels' must be a list of strings"),
        ('name = "ops"\ndescription = "   "\n', "'description' is empty"),
        ('name = "Ops Team"\ndescription = "Ops"\n', "invalid knowledge base name 'Ops Team'"),
        ('name = "ops"\ndescription = "Ops"\nvisibility = "secret"\n', "visibility must be 'public' or 'restricted'"),
        ('name = "ops"\ndescription = "Ops\n', "kb.toml: "),  # not TOML
    ],
)
def test_manifest_errors_name_the_file(tmp_path: Path, body: str, message: str) -> None:
    from tools.manifests import ManifestError, load_manifest

    path = _declare(tmp_path, "ops", body)
    with pytest.raises(ManifestError) as excinfo:
        load_manifest(path)
    assert str(excinfo.value).startswith(str(path)) and message in str(excinfo.value)


def test_a_broken_manifest_does_not_take_the_other_kbs_down(make_settings, tmp_path: Path, run_cli) -> None:
    kbs = tmp_path / "knowledge_bases"
    _declare(kbs, "ops", 'name = "ops"\ndescription = "Operations runbooks"\n')
    broken = _declare(kbs, "zz-broken", 'name = "broken"\n')
    duplicate = _declare(kbs, "ops-copy", 'name = "ops"\ndescription = "Same name again"\n')
    settings = make_settings(KBBOT_KNOWLEDGE_BASES_DIR=kbs)

    listed = run_cli(settings, "kb", "list", "--json")  # reading: skip what is broken, keep the rest
    assert listed.code == 0
    # Two files declaring "ops": neither decides its rules, so it is not declared at all until one is fixed.
    assert [kb["name"] for kb in json.loads(listed.out)] == []
    (kbs / "ops-copy" / "kb.toml").unlink()
    listed = run_cli(settings, "kb", "list", "--json")
    assert [kb["name"] for kb in json.loads(listed.out)] == ["ops"]

    synced = run_cli(settings, "kb", "sync", "--json")  # the admin's command: refuse, naming the file
    assert synced.code == 1
    assert str(duplicate) in synced.err or str(broken) in synced.err


def test_an_unusable_data_dir_is_a_one_line_error(make_settings, tmp_path: Path, run_cli) -> None:
    occupied = tmp_path / "not-a-dir"
    occupied.write_text("a file where the data dir should be", encoding="utf-8")
    result = run_cli(make_settings(occupied), "kb", "list")
    assert result.code == 1
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot open the kbbot data dir {occupied}"), result.err
