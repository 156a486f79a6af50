"""Pure parts of the shortcuts and /kb channel: a thread → document, and replies that stay within Slack's limits."""

from __future__ import annotations

from bot.core import ChannelKb, ChannelView
from bot.slack.blocks import KbEntry, kb_head
from bot.slack.channel_command import view_text
from bot.slack.render import TEXT_LIMIT
from bot.slack.shortcut_views import default_title, save_thread_modal
from bot.slack.thread_document import document_name, render_document, thread_messages

BOT_ID, BOT_USER = "B0KBBOT001", "U0KBBOT001"


def test_a_thread_keeps_its_people_dates_and_text_and_drops_kbbot_and_system_messages():
    replies = [
        {"ts": "1767225600.000100", "user": "U0ALICE001", "text": "Where is the <#C0PEOPLE01|people> policy?"},
        {"ts": "1767225660.000200", "user": BOT_USER, "bot_id": BOT_ID, "text": "From the KBs: ... [1]"},
        {"ts": "1767225670.000300", "user": "U0BOB00001", "subtype": "channel_join", "text": "joined"},
        {
            "ts": "1767225720.000400",
            "user": "U0BOB00001",
            "text": "In the handbook <!channel>",
            "files": [{"name": "a.pdf"}],
        },  # noqa: E501
        {"ts": "1767225780.000500", "user": "U0CAROL001", "text": "   "},
    ]
    names = {"U0ALICE001": "Alice"}
    messages = thread_messages(replies, lambda u: names.get(u, u), BOT_ID, BOT_USER)
    assert [m.speaker for m in messages] == ["Alice", "U0BOB00001"]
    document = render_document(
        "  Leave\npolicy ", "C0PEOPLE01", messages, "https://lumen.slack.com/archives/C/p1"
    ).decode()
    assert document.startswith("# Leave policy\n")
    assert "**Alice** (2026-01-01 00:00 UTC): Where is the #people policy?" in document
    assert "**U0BOB00001** (2026-01-01 00:02 UTC): In the handbook (shared a.pdf)" in document
    assert "<!channel>" not in document and "From the KBs" not in document and "joined" not in document


def test_the_document_name_follows_the_thread_not_the_title():
    assert document_name("C0PEOPLE01", "1767225600.000100") == "slack-thread-C0PEOPLE01-1767225600-000100.md"
    assert document_name("C0PEOPLE01", "1767225600.000100") != document_name("C0PEOPLE01", "1767225600.000101")
    assert "/" not in document_name("C0/../x", "1.2/3")


def test_the_save_modal_offers_only_the_given_kbs_and_a_title_within_limits():
    view = save_thread_modal([f"kb{i}" for i in range(150)], "x" * 500, {"channel": "C1", "thread_ts": "1.2"})
    assert len(view["blocks"][0]["element"]["options"]) == 100
    assert len(view["blocks"][1]["element"]["initial_value"]) <= 150
    assert default_title("\n\nFirst line here\nsecond") == "First line here"
    assert default_title("") == "Slack thread"


def test_channel_replies_stay_within_block_kit_limits():
    many = tuple(ChannelKb("k" * 200 + str(i), i % 2 == 0, "U0ADMIN001") for i in range(300))
    text = view_text(ChannelView("C0PEOPLE01", many, tuple("x" * 100 for _ in range(300)), True))
    assert len(text) <= TEXT_LIMIT
    head = kb_head(KbEntry("people", "", False, False, 0, 0, 0, [], channels=[f"C0CHAN{i:04d}" for i in range(40)]))
    assert "<#C0CHAN0000>" in head and "and 30 more" in head
    forged = kb_head(KbEntry("people", "", False, False, 0, 0, 0, [], channels=["<!channel>"]))
    assert "<!channel>" not in forged
