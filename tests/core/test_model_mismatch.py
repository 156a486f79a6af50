"""A KB indexed with another embedding model is skipped (with a note) and named; the others still answer."""

from __future__ import annotations

import sqlite3

import pytest

from bot.core import KnowledgeBot, Origin
from bot.core.errors import KnowledgeBaseError


@pytest.fixture
def mismatched(sample_settings):
    with sqlite3.connect(sample_settings.data_dir / "registry.sqlite3") as db:
        db.execute("UPDATE kbs SET embedding_model = 'another/model' WHERE name = 'product'")
    with KnowledgeBot(sample_settings) as bot:
        yield bot


def test_the_other_kbs_answer_and_the_mismatched_one_is_named(mismatched):
    answer = mismatched.ask(Origin.cli(), "How many vacation days do full-time staff get per year?").answer
    assert answer.status == "answered" and "25 days" in answer.answer
    assert "product" not in answer.route.scores and "product" not in answer.searched_kbs
    assert any(note.startswith("product was not searched: indexed with another/model") for note in answer.notes)
    [product] = [s for s in mismatched.summaries(Origin.cli()) if s.name == "product"]
    assert "kbbot kb reindex product" in product.problem


def test_pinning_the_mismatched_kb_is_a_clear_refusal_not_a_crash(mismatched):
    answer = mismatched.ask(Origin.cli(), "How long is an OAuth access token valid for the API?", kb="product").answer
    assert answer.status == "insufficient_context" and answer.citations == []
    with pytest.raises(KnowledgeBaseError, match="reindex"):
        mismatched.search(Origin.cli(), "product", "OAuth token", 5)
