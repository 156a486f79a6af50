"""Answer units: what an offline answer quotes. They follow sentences, not lines: a hard-wrapped paragraph
(plain-text docs, man pages) is cut at its sentence ends, a table row stays whole and reads with its header,
a list item keeps the sentence that introduces it. The unit vectors saved at ingest follow the same units."""

from __future__ import annotations

from pathlib import Path

from tools.embeddings import embed_chunks, get_embedder
from tools.parsing import parse_file
from tools.store import StoredChunk
from tools.text import answer_units, sentence_spans

FIXTURES = Path(__file__).parent / "fixtures" / "hard-wrapped"

WRAPPED = (
    "Use `klaxon snooze` when an alert keeps paging for a problem that is\n"
    "already being handled, so that the person on call can work without the\n"
    "pager going off every few minutes.  A snoozed alert still records every\n"
    "firing in the incident timeline, but nobody is paged until the snooze\n"
    "expires (e.g. after `30m`) or is lifted.\n"
)


def texts(text: str) -> list[str]:
    return [u.text for u in answer_units(text)]


def test_a_hard_wrapped_paragraph_is_cut_at_its_sentences_not_its_lines() -> None:
    assert texts(WRAPPED) == [
        "Use `klaxon snooze` when an alert keeps paging for a problem that is already being handled, so that the "
        "person on call can work without the pager going off every few minutes.",
        "A snoozed alert still records every firing in the incident timeline, but nobody is paged until the snooze "
        "expires (e.g. after `30m`) or is lifted.",
    ]
    # Each unit's span covers its sentence in the original text, line breaks and all (the vector is pooled there).
    first, second = answer_units(WRAPPED)
    assert WRAPPED[first.start : first.end].startswith("Use `klaxon")
    assert WRAPPED[first.end - 8 : first.end] == "minutes."
    assert WRAPPED[second.start : second.end].endswith("or is lifted.")


def test_headings_and_short_lines_are_not_glued_to_the_next_sentence() -> None:
    # The PDF parser's shape: a heading line, then a paragraph on one line.
    text = "Health savings account\nIf you choose the HDHP, Lumen contributes $1,000 per year.\nDental and vision"
    assert texts(text) == [
        "Health savings account",
        "If you choose the HDHP, Lumen contributes $1,000 per year.",
        "Dental and vision",
    ]
    # A short line ending a sentence is one too; a line starting in lower case continues the one before.
    assert texts("Contractors are not eligible.\nThey may attend tech talks, and\nmay ask for a licence.") == [
        "Contractors are not eligible.",
        "They may attend tech talks, and may ask for a licence.",
    ]


def test_a_table_row_is_one_unit_that_reads_with_its_header() -> None:
    text = (
        "Feature | Starter | Growth | Enterprise\n\n"
        "Price (annual billing) | $29/vehicle/month | $59/vehicle/month | Custom (min. $25,000/year)\n\n"
        "SSO (SAML) | – | – | Included"
    )
    assert texts(text) == [
        "Feature | Starter | Growth | Enterprise",
        "Feature: Price (annual billing); Starter: $29/vehicle/month; Growth: $59/vehicle/month; "
        "Enterprise: Custom (min. $25,000/year)",
        "Feature: SSO (SAML); Enterprise: Included",
    ]
    markdown = "| Time | What happens |\n|---|---|\n| 09:30 | Welcome session |\n| 10:30 | IT setup call |"
    assert texts(markdown)[1:] == [
        "Time: 09:30; What happens: Welcome session",
        "Time: 10:30; What happens: IT setup call",
    ]


def test_a_row_shorter_than_its_header_still_reads_with_it() -> None:
    # The docx parser drops a row's empty last cells: "Ergonomic chair | $400" under a three-column header
    # was quoted bare (and scored as a header row), so "and a chair?" got the monitor's row instead.
    text = (
        "Item | Spending limit | Notes\n"
        "External monitor | $350 each | Up to 2 monitors\n"
        "Ergonomic chair | $400\n"
        "Headset | $120 | Noise-cancelling recommended"
    )
    assert texts(text)[1:3] == [
        "Item: External monitor; Spending limit: $350 each; Notes: Up to 2 monitors",
        "Item: Ergonomic chair; Spending limit: $400",
    ]


def test_a_command_synopsis_is_not_a_table() -> None:
    # The bars of a synopsis are alternatives inside brackets: read as table rows, the second line was paired
    # with the first as its "header" ("[-p: [-u; --patch] …"), the man page's SYNOPSIS quoted as garbage.
    synopsis = (
        "git stash show [-u | --include-untracked | --only-untracked] [<stash>]\n"
        "git stash save [-p | --patch] [-q | --quiet] [(-m | --message) <message>]\n"
    )
    units = answer_units(synopsis)
    assert all(u.kind == "text" for u in units)
    assert " ".join(u.text for u in units) == " ".join(synopsis.split())
    assert answer_units("Plan | Price\nStarter | $29")[1].text == "Plan: Starter; Price: $29", "a table stays one"


def test_a_list_item_keeps_the_sentence_that_introduces_it() -> None:
    text = (
        "The default escalation policy looks like this:\n\n"
        "1. **Primary on-call** is paged immediately.\n"
        "2. If not acknowledged within 5 minutes, the **secondary on-call** is paged."
    )
    units = answer_units(text)
    assert [(u.lead, u.text) for u in units[1:]] == [
        ("The default escalation policy looks like this:", "Primary on-call is paged immediately."),
        (
            "The default escalation policy looks like this:",
            "If not acknowledged within 5 minutes, the secondary on-call is paged.",
        ),
    ]
    assert "2." not in [u.text for u in units], "an item's number is not a sentence"


def test_an_option_description_names_its_option() -> None:
    text = "-q::\n--quiet::\n\tQuiet, suppress feedback\n\tmessages.\n+\nThe default is to report."
    units = answer_units(text)
    described = next(u for u in units if u.text.startswith("Quiet"))
    assert (described.lead, described.text) == ("-q, --quiet:", "Quiet, suppress feedback messages.")
    assert not any(u.text.startswith("+") for u in units)


def test_the_fixture_manual_reads_in_whole_sentences_in_both_formats() -> None:
    for name in ("klaxon-snooze.txt", "klaxon-snooze.html"):
        units = [u for s in parse_file(FIXTURES / name).sections for u in answer_units(s.text)]
        sentences = [u.text for u in units if u.kind == "text" and len(u.text) > 60]
        assert sentences, name
        # A sentence ends with its full stop, not at a line break in mid-clause.
        assert all(s.endswith((".", ":", ")")) for s in sentences), (name, sentences)
        assert any(s.startswith("Snoozes longer than four hours") and s.endswith("alerts channel.") for s in sentences)


def test_sentence_spans_do_not_overlap_and_stay_in_order() -> None:
    text = (FIXTURES / "klaxon-snooze.txt").read_text(encoding="utf-8")
    spans = sentence_spans(text)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))


def test_unit_vectors_follow_the_units_of_a_hard_wrapped_chunk(settings) -> None:
    chunk = StoredChunk("k/d@v1#0", "k", "klaxon-snooze.txt", 1, 0, "klaxon-snooze", "DESCRIPTION", WRAPPED)
    _, units = embed_chunks(get_embedder(settings), [chunk])
    assert units is not None and len(units[0]) == len(answer_units(WRAPPED)) == 2


# --- session 7: what a PDF's table lines and an HTML definition list read as ----------------------------------

PDF_PAGE = (
    "Hotels are capped per night, excluding taxes. TripDesk shows the cap when you search.\n"
    "City tier Examples Nightly cap\n"
    "Tier 1\n"
    "London, Zurich\n"
    "$260\n"
    "Meals and per diem\n"
    "When you travel overnight you receive a flat meal per diem of $75 per day for domestic trips.\n"
)


def test_a_short_sentence_or_the_next_paragraphs_heading_is_not_a_cell_of_a_pdf_table() -> None:
    # The PDF parser's shape: a table a cell per line. Runs of short lines stay one unit (the table), but the
    # sentence before it is no cell of it, nor the heading of the paragraph after it ("Meals and per diem").
    units = answer_units(PDF_PAGE)
    assert [u.text for u in units] == [
        "Hotels are capped per night, excluding taxes.",
        "TripDesk shows the cap when you search.",
        "City tier Examples Nightly cap Tier 1 London, Zurich $260",
        "Meals and per diem",
        "When you travel overnight you receive a flat meal per diem of $75 per day for domestic trips.",
    ]
    assert units[3].kind == "heading"
    # Short sentences of one paragraph still read together; a table's last row ("Enterprise 3,000") is no heading.
    assert texts("Yes.\nYou can plan up to 14 days in advance.\n") == ["Yes. You can plan up to 14 days in advance."]
    table = "Plan Requests per minute\nStarter 60\nEnterprise 3,000\nLimits apply per API key and reset every minute.\n"
    assert texts(table)[0] == "Plan Requests per minute Starter 60 Enterprise 3,000"


def test_an_html_table_row_and_a_definition_read_as_answers(tmp_path) -> None:
    page = tmp_path / "travel.html"
    page.write_text(
        "<html><body><h1>Travel limits</h1><p>Hotels are capped per night.</p>"
        "<table><tr><th>City tier</th><th>Nightly cap</th></tr><tr><td>Tier 1</td><td>$260</td></tr></table>"
        "<dl><dt>Per diem</dt><dd>$75 per day for domestic trips.</dd><dt>Mileage</dt><dd>$0.67 per mile.</dd></dl>"
        "</body></html>",
        encoding="utf-8",
    )
    units = [u for s in parse_file(page).sections for u in answer_units(s.text)]
    assert "City tier: Tier 1; Nightly cap: $260" in [u.text for u in units]
    defined = {u.text: u.lead for u in units if u.lead}
    assert defined == {"$75 per day for domestic trips.": "Per diem:", "$0.67 per mile.": "Mileage:"}
    # A heading the sentence names itself is no term it defines.
    assert all(not u.lead for u in answer_units("Hotels\nHotels are capped per night, excluding taxes.\n"))


def test_money_amounts_asked_and_the_ranges_rules_state() -> None:
    from tools.text import asked_amount, money_ranges

    assert asked_amount("who signs a $300k contract?") == 300_000
    assert asked_amount("who approves a 9k expense claim?") == 9_000
    assert asked_amount("extra approval for a purchase over a million?") > 1_000_000
    assert asked_amount("how many days off for a 5 day trip?") is None, "a number is money only with a sign or scale"
    assert asked_amount("is $50 or $80 the limit?") is None, "two amounts: no one amount to place"
    flat = "Up to $2,000 Your manager $2,000.01 to $7,500 Your department head Over $7,500 the VP Finance"
    assert money_ranges(flat) == [(0.0, 2000.0), (2000.01, 7500.0), (7500.001, float("inf"))]
    assert money_ranges("unbudgeted spend above $5,000 needs the CFO")[0][0] > 5000, "above leaves the amount out"
    assert money_ranges("单笔金额超过 ¥5,000 的报销") == [(5000.001, float("inf"))]
    assert money_ranges("The Growth plan costs $59 per vehicle.") == [], "a bare amount states no range"
