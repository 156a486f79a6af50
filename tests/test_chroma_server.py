"""kbbot against a real Chroma server (`chroma run`, shipped with chromadb) on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.chroma_server import ChromaServer, free_port
from helpers.cli import child_env

from tools.service import KnowledgeService


@pytest.fixture
def chroma_server(tmp_path: Path, make_settings) -> Iterator[tuple[str, int]]:
    """`chroma run` on a free port, ready (heartbeat answers) before the test starts; always stopped."""
    server = ChromaServer(tmp_path / "chroma-server", tmp_path / "chroma.log", child_env(make_settings()))
    try:
        server.start()
        yield server.host, server.port
    finally:
        server.stop()


def test_ingest_and_search_through_a_chroma_server(chroma_server, make_settings, tmp_path: Path) -> None:
    host, port = chroma_server
    settings = make_settings(CHROMA_HOST=host, CHROMA_PORT=port)
    doc = tmp_path / "escalation.md"
    doc.write_text(
        "# Escalation\n\n## Night shift\n\nAfter 22:00 page the duty engineer through PagerDuty service LUM-OPS.\n",
        encoding="utf-8",
    )
    with KnowledgeService(settings.tools) as svc:
        svc.create_kb("ops", "Operations runbooks")
        report = svc.ingest("ops", [doc])
        assert report.ok and report.embedded_chunks == 1
        # The chunks live in the server, not under the data dir.
        assert not (settings.data_dir / "chroma").exists()
        collection = svc.store.client.get_collection(svc.store.registry.get_kb("ops").collection)
        assert collection.count() == 1
        assert collection.metadata["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"

        vector = svc.embedder.embed_query("who do I page at night?")
        hits = svc.store.dense_search("ops", vector, 5)
        assert [c.location for c, _ in hits] == ["Escalation > Night shift"]
        assert "LUM-OPS" in hits[0][0].text and hits[0][1] > 0.3
        assert svc.store.keyword_index("ops").search("PagerDuty", 3)[0][0] == "ops/escalation.md@v1#0"

        # A new version replaces the old one on the server too.
        doc.write_text(
            "# Escalation\n\n## Night shift\n\nAfter 23:00 call the on-call lead directly.\n", encoding="utf-8"
        )
        assert svc.ingest("ops", [doc]).documents[0].status == "ready"
        assert collection.get()["ids"] == ["ops/escalation.md@v2#0"]

    # Another process sees the same store through the server.
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "kb", "list", "--json"],
        env=child_env(settings),
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"name": "ops"' in done.stdout and '"chunks": 1' in done.stdout


def test_an_unreachable_chroma_server_is_a_one_line_error(make_settings, run_cli, tmp_path: Path) -> None:
    port = free_port()
    settings = make_settings(CHROMA_HOST="127.0.0.1", CHROMA_PORT=port)  # nothing listens there
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nSome text.\n", encoding="utf-8")
    for args in (("kb", "create", "ops", "--description", "Operations"), ("ingest", "--kb", "people", str(doc))):
        result = run_cli(settings, *args)
        assert result.code == 1, args
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"error: the Chroma server at 127.0.0.1:{port} is unreachable"
        ), result.err
    # Listing reads only the registry: it works without the server (and created nothing above).
    result = run_cli(settings, "kb", "list", "--json")
    assert result.code == 0, result.err
    assert all(kb["documents"] == 0 and kb["embedding_model"] is None for kb in json.loads(result.out))
