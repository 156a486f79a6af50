"""Slack-surface pieces that need no server: rendering, message cleaning, history turns, de-duplication."""

from __future__ import annotations

import threading

import pytest

from bot.agent.models import Answer, Citation, RoundTrace, Route
from bot.slack.conversation import Question, turns_from
from bot.slack.idempotency import ClaimLedger
from bot.slack.markup import clean_text, mentions
from bot.slack.render import NOT_FOUND_HEADING, render_answer, split_text, to_mrkdwn
from bot.slack.uploads import SlackFile, precheck

BOT = "UBOTKBBOT1"


def answer(status="answered", text="Staff get **25 days** [1] & carry over 5 [2].", citations=None, **kw) -> Answer:
    citations = (
        citations
        if citations is not None
        else [
            Citation(
                1,
                "people",
                "leave.md",
                "c1",
                "Full-time staff get 25 days of annual leave per year.",
                0.9,
                "Leave policy > Annual leave > Entitlement",
            ),
            Citation(
                2,
                "people",
                "handbook.pdf",
                "c2",
                "Up to 5 days carry over. " * 30,
                0.8,
                "p. 4",
                source_url="https://lumen.slack.com/files/U1/F1/handbook.pdf",
            ),
        ]
    )
    return Answer(
        status=status,
        answer=text,
        question="q?",
        standalone_query="q",
        route=Route(["people"], {"people": 0.9}),
        rounds=[RoundTrace("q", ["people"], status == "answered", "ok")],
        citations=citations,
        timings_ms={"total": 1234.0},
        searched_kbs=["people", "product"],
        **kw,
    )


def blocks_text(blocks: list[dict]) -> str:
    out = []
    for block in blocks:
        if "text" in block:
            out.append(block["text"]["text"])
        for element in block.get("elements", []):
            if isinstance(element.get("text"), str):
                out.append(element["text"])
    return "\n".join(out)


def test_answer_renders_text_sources_context_and_feedback():
    rendered = render_answer(answer(), "a1")
    text = blocks_text(rendered.blocks)
    assert "Staff get *25 days* [1] &amp; carry over 5 <https://lumen.slack.com/files/U1/F1/handbook.pdf|[2]>." in text
    assert "*Sources*" in text
    assert "*[1]* *leave.md* · Annual leave › Entitlement · _people_" in text  # document, short location, KB
    assert "<https://lumen.slack.com/files/U1/F1/handbook.pdf|handbook.pdf>" in text  # link to the Slack file
    assert max(len(line) for line in text.splitlines() if line.startswith("“")) < 170  # short excerpts
    assert ":books: people · 1 round · offline · 1.2 s" in text
    [feedback] = [b for b in rendered.blocks if b["type"] == "context_actions"]
    assert feedback["elements"][0]["type"] == "feedback_buttons"
    assert {
        feedback["elements"][0]["positive_button"]["value"],
        feedback["elements"][0]["negative_button"]["value"],
    } == {"good:a1", "bad:a1"}
    assert rendered.text.startswith("Staff get") and "Sources" not in rendered.text  # what history reads back
    assert [b["type"] for b in rendered.footer_blocks][-1] == "context_actions"
    assert "[\\[2\\]](https://lumen.slack.com/files/U1/F1/handbook.pdf)" in rendered.markdown


def test_insufficient_context_reply_looks_different():
    rendered = render_answer(answer("insufficient_context", "Nothing about parking in people, product.", []), "a2")
    text = blocks_text(rendered.blocks)
    assert NOT_FOUND_HEADING in text and "Sources" not in text
    assert ":mag_right: Searched people, product" in text
    assert rendered.text.startswith("The knowledge bases don't have enough")


def test_document_text_cannot_ping_or_inject_markup():
    rendered = render_answer(answer(text="Ask <!channel> or <@U123> about <https://evil|this> [1]."), "a3")
    text = blocks_text(rendered.blocks)
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text
    assert "<!channel>" not in rendered.markdown and "<@U123>" not in rendered.markdown


def test_long_answers_are_split_into_section_sized_pieces():
    pieces = split_text(("word " * 200 + "\n\n") * 5, limit=1000)
    assert len(pieces) >= 5 and all(len(p) <= 1000 for p in pieces)
    assert to_mrkdwn("# Title\nbody") == "*Title*\nbody"


def test_slack_markup_is_cleaned_for_the_engine():
    text = f"<@{BOT}> what about <@U0OTHER1|maria>'s leave &amp; <https://x.example/a|this page> in <#C123|general>?"
    assert clean_text(text) == "what about @maria's leave & this page in #general?"
    assert mentions(text, BOT) and not mentions("hello", BOT)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("<@U0123ABC> hello", "hello"),
        ("<@U0123ABC|alice> hello", "@alice hello"),
        (
            "how long is probation for <https://intranet.example/onboarding|new hires>?",
            "how long is probation for new hires?",
        ),
        ("see <https://x.example/a>", "see https://x.example/a"),
        ("mail <mailto:hr@x.example|hr@x.example>", "mail hr@x.example"),
        ("in <#C0123|general> and <!here>", "in #general and"),
        ("is <#C0123ABC> the right channel?", "is #C0123ABC the right channel?"),
        ("ask <!subteam^S0123|@platform>", "ask @platform"),
        ("R&amp;D &lt;team&gt;", "R&D <team>"),
        ("  spaced\n\nout  ", "spaced out"),
    ],
)
def test_slack_markup_to_plain_text(raw, clean):
    """The one cleaner: a user id never reaches the engine (it reads like an identifier documents must name)."""
    assert clean_text(raw) == clean


def test_thread_messages_become_turns_before_the_current_message():
    q = Question(
        "C1",
        "U1",
        "and sick days?",
        ts="105.0",
        thread_ts="100.0",
        is_dm=False,
        team="T",
        surface="thread",
        bot_user_id=BOT,
        bot_id="B1",
    )
    messages = [
        {"ts": "100.0", "user": "U1", "text": f"<@{BOT}> how many vacation days?"},
        {"ts": "101.0", "user": BOT, "bot_id": "B1", "text": "25 days [1]"},
        {"ts": "102.0", "bot_id": "B0OTHER", "text": "another bot"},
        {"ts": "103.0", "user": "U2", "subtype": "channel_join", "text": "joined"},
        {"ts": "105.0", "user": "U1", "text": "and sick days?"},
        {"ts": "106.0", "user": "U1", "text": "later message"},
    ]
    turns = turns_from(q, messages)
    assert [(t.role, t.text) for t in turns] == [("user", "how many vacation days?"), ("assistant", "25 days [1]")]


def test_claims_survive_a_restart(tmp_path):
    path = tmp_path / "deliveries.sqlite3"
    ledger = ClaimLedger(path)
    assert ledger.claim("event:Ev1") and not ledger.claim("event:Ev1")
    ledger.close()
    again = ClaimLedger(path)
    assert not again.claim("event:Ev1") and again.claim("event:Ev2")
    expired = ClaimLedger(tmp_path / "other.sqlite3", ttl_s=0)
    assert expired.claim("k") and expired.claim("k")


def test_precheck_refuses_from_metadata():
    assert precheck(SlackFile("F1", "a.md", 10, "u"), 100) is None
    assert "unsupported file type .exe" in precheck(SlackFile("F1", "a.exe", 10, "u"), 100)
    assert "over the" in precheck(SlackFile("F1", "a.pdf", 101, "u"), 100)


def test_the_bot_token_is_only_sent_to_slack():
    import pytest

    from bot.slack.uploads import DownloadError, download, is_trusted_host

    assert is_trusted_host("https://files.slack.com/files-pri/T1-F1/a.md", set())
    assert is_trusted_host("http://127.0.0.1:8080/files-pri/x", {"127.0.0.1"})
    assert not is_trusted_host("https://slack.com.evil.example/a.md", set())
    with pytest.raises(DownloadError, match="not a Slack URL"):
        download("https://evil.example/a.md", "xoxb-secret", 100, set())


def test_a_pool_starts_all_its_threads_before_the_first_task():
    from bot.slack.work import WorkPool

    pool = WorkPool("kbbot-test-prestart", workers=3, capacity=10)
    try:
        pool.start_threads()
        started = [t for t in threading.enumerate() if t.name.startswith("kbbot-test-prestart")]
        assert len(started) == 3
        done = threading.Event()
        assert pool.submit(done.set) and done.wait(5)
        assert len([t for t in threading.enumerate() if t.name.startswith("kbbot-test-prestart")]) == 3
    finally:
        pool.drain(5)
