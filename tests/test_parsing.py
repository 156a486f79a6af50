"""Parsers on real files: structure (headings, pages, tables) kept, boilerplate dropped, encodings
decoded, and every kind of unusable input refused with a one-line reason. No embedding model needed."""

from __future__ import annotations

import time
import zipfile
from pathlib import Path

import pytest
from helpers import hostile
from helpers.documents import (
    encrypt_pdf,
    write_corrupt_pdf,
    write_docx,
    write_docx_zip_bomb,
    write_not_a_zip_docx,
    write_pdf,
    write_pdf_with_table,
    write_truncated_pdf,
    write_two_column_pdf,
    zip_members_total,
)

from tools.chunking import ChunkWindow, chunk_document
from tools.parsing import ParsedDocument, UnreadableDocument, parse_file
from tools.text import answer_units


def by_location(parsed: ParsedDocument) -> dict[str, str]:
    result: dict[str, str] = {}
    for section in parsed.sections:
        result[section.location] = (result.get(section.location, "") + "\n" + section.text).strip()
    return result


def whitespace_tokenizer(text: str) -> list[str]:
    return text.split()


# --- Markdown ---------------------------------------------------------------------------------


def test_markdown_heading_path_becomes_location(tmp_path: Path) -> None:
    path = tmp_path / "handbook.md"
    path.write_text(
        "# Lumen Handbook\n\nWelcome text.\n\n"
        "## Leave\n\nEveryone gets 25 days of annual leave.\n\n"
        "### Parental leave\n\nPrimary caregivers get 16 weeks fully paid.\n\n"
        "```bash\n# not a heading, a shell comment\necho hi\n```\n\n"
        "## Expenses\n\nSubmit receipts within 30 days.\n",
        encoding="utf-8",
    )
    parsed = parse_file(path)
    assert parsed.title == "Lumen Handbook"
    sections = by_location(parsed)
    assert "Primary caregivers get 16 weeks" in sections["Lumen Handbook > Leave > Parental leave"]
    # The code fence stays inside its section: its comment is not a heading.
    assert "# not a heading" in sections["Lumen Handbook > Leave > Parental leave"]
    assert "25 days" in sections["Lumen Handbook > Leave"]
    assert "30 days" in sections["Lumen Handbook > Expenses"]  # a sibling pops the deeper path


def test_markdown_without_top_heading_uses_relative_path(tmp_path: Path) -> None:
    path = tmp_path / "policy.md"
    path.write_text("## Leave\n\n### Parental leave\n\nSixteen weeks.\n", encoding="utf-8")
    parsed = parse_file(path)
    assert parsed.title == "policy"
    assert [s.location for s in parsed.sections] == ["Leave > Parental leave"]


def test_chunks_keep_their_section_location(tmp_path: Path) -> None:
    path = tmp_path / "long.md"
    body = " ".join(f"Sentence {i} about the parental leave policy and its rules." for i in range(120))
    path.write_text(
        f"# Leave\n\n## Parental leave\n\n{body}\n\n## Sick leave\n\nThree days need a note.\n", encoding="utf-8"
    )
    drafts = chunk_document(parse_file(path), whitespace_tokenizer, ChunkWindow(120, 10))
    parental = [d for d in drafts if d.location == "Leave > Parental leave"]
    assert len(parental) > 3, "a long section is split into several chunks"
    assert all(len(d.text.split()) <= 120 for d in drafts)
    assert [d.index for d in drafts] == list(range(len(drafts)))
    assert drafts[-1].location == "Leave > Sick leave" and "Three days" in drafts[-1].text


# --- HTML -------------------------------------------------------------------------------------

HTML_PAGE = """<!DOCTYPE html>
<html><head><title>Parental leave | Lumen Intranet</title>
<style>.x { color: red }</style><script>var tracking = "SCRIPT-TEXT";</script></head>
<body>
<div id="cookie-banner" class="cookie-consent">We use cookies. ACCEPT-ALL-COOKIES</div>
<header><a href="/">Lumen Intranet HEADER-TEXT</a></header>
<nav><ul><li><a href="/leave">NAV-LEAVE-LINK</a></li><li>NAV-BENEFITS</li></ul></nav>
<main>
  <h1>Parental leave</h1>
  <p>Lumen Freight supports new parents.</p>
  <h2>Primary caregivers</h2>
  <p>Primary caregivers receive <strong>16 weeks</strong> of fully paid leave.</p>
  <ul><li>Notify HR 8 weeks before the due date.</li><li>Use the form PL-2.</li></ul>
  <h2>Secondary caregivers</h2>
  <div class="content">Secondary caregivers receive 4 weeks of paid leave.</div>
  <table><tr><th>Tenure</th><th>Top-up</th></tr><tr><td>Over 2 years</td><td>100%</td></tr></table>
</main>
<aside class="sidebar">SIDEBAR-RELATED-LINKS</aside>
<footer>FOOTER-COPYRIGHT 2026 Lumen Freight</footer>
</body></html>
"""


def test_html_boilerplate_stripped_headings_kept(tmp_path: Path) -> None:
    path = tmp_path / "parental-leave.html"
    path.write_text(HTML_PAGE, encoding="utf-8")
    parsed = parse_file(path)
    everything = "\n".join(s.text for s in parsed.sections)
    for junk in (
        "SCRIPT-TEXT",
        "ACCEPT-ALL-COOKIES",
        "HEADER-TEXT",
        "NAV-LEAVE-LINK",
        "NAV-BENEFITS",
        "SIDEBAR-RELATED-LINKS",
        "FOOTER-COPYRIGHT",
        "color: red",
    ):
        assert junk not in everything, junk
    assert parsed.title == "Parental leave"
    sections = by_location(parsed)
    primary = sections["Parental leave > Primary caregivers"]
    assert "16 weeks of fully paid leave" in primary
    assert "Notify HR 8 weeks before the due date." in primary
    secondary = sections["Parental leave > Secondary caregivers"]
    assert "Over 2 years" in secondary and "100%" in secondary


def test_html_text_outside_paragraph_tags_is_kept(tmp_path: Path) -> None:
    """Wiki exports put text straight into <div>s and after <br>s; none of it may be dropped."""
    path = tmp_path / "export.html"
    path.write_text(HTML_PAGE, encoding="utf-8")
    sections = by_location(parse_file(path))
    assert "Secondary caregivers receive 4 weeks of paid leave." in sections["Parental leave > Secondary caregivers"]

    bare = tmp_path / "bare.html"
    bare.write_text(
        "<html><body><h1>Runbook</h1>Restart the dispatcher with <code>systemctl restart lumen</code>.<br>"
        "Then check the queue depth stays under 500.<div><span>Escalate to SRE after 15 minutes.</span></div>"
        "</body></html>",
        encoding="utf-8",
    )
    text = by_location(parse_file(bare))["Runbook"]
    assert "systemctl restart lumen" in text
    assert "queue depth stays under 500" in text
    assert "Escalate to SRE after 15 minutes." in text


def test_html_without_main_or_headings_falls_back_to_title(tmp_path: Path) -> None:
    path = tmp_path / "note.htm"
    path.write_text(
        "<html><head><title>Office hours</title></head><body><p>Open 9-17.</p></body></html>", encoding="utf-8"
    )
    parsed = parse_file(path)
    assert parsed.title == "Office hours"
    assert [(s.location, s.text) for s in parsed.sections] == [("Office hours", "Open 9-17.")]


# --- PDF --------------------------------------------------------------------------------------


def test_pdf_pages_become_locations(tmp_path: Path) -> None:
    path = write_pdf(
        tmp_path / "runbook.pdf",
        [
            "Database failover runbook. Step 1: page the on-call DBA.",
            "Step 2: promote the replica db-replica-2 with pg_ctl promote.",
            "Step 3: update the DNS record within 5 minutes.",
        ],
        title="Failover Runbook",
    )
    parsed = parse_file(path)
    assert parsed.title == "Failover Runbook"
    sections = by_location(parsed)
    assert list(sections) == ["p. 1", "p. 2", "p. 3"]
    assert "db-replica-2" in sections["p. 2"]
    assert "within 5 minutes" in sections["p. 3"]


def test_pdf_running_header_and_page_numbers_are_not_page_text(tmp_path: Path) -> None:
    """A line on every page's edge and "Page N of M" footers are page furniture. Glued to a page's first sentence,
    "Lumen Engineering Runbook - dispatch-db-prod Procedure: ..." was quoted as an answer."""
    header = "Lumen Engineering Runbook - dispatch-db-prod"
    bodies = ["Runbook: failover.\nPage the DBA first.", "Procedure:\nPromote the replica.", "Contacts:\nAsk in #dbre."]
    path = write_pdf(tmp_path / "runbook.pdf", [f"{header}\n{body}\nPage {n} of 3" for n, body in enumerate(bodies, 1)])
    pages = [s.text for s in parse_file(path).sections]
    assert pages == [
        "Runbook: failover.\nPage the DBA first.",
        "Procedure:\nPromote the replica.",
        "Contacts:\nAsk in #dbre.",
    ]


APPROVALS = [
    ["Claim amount", "Who must approve"],
    ["Up to $2,000", "Your manager"],
    ["$2,000.01 to $7,500", "Your manager and your department head"],
    ["Over $7,500", "Manager, department head and the VP Finance"],
]


def test_pdf_table_rows_read_with_their_column_names(tmp_path: Path) -> None:
    """pypdf's plain text ran a table's rows together and into the heading under it ("… Over $7,500 Manager,
    department head and the VP Finance When you get paid"): one "sentence" an answer quoted whole."""
    path = write_pdf_with_table(tmp_path / "expenses.pdf", "Approval limits", APPROVALS, "When you get paid")
    units = [u.text for u in answer_units(parse_file(path).sections[0].text)]
    assert units == [
        "Approval limits",
        "Claim amount | Who must approve",
        "Claim amount: Up to $2,000; Who must approve: Your manager",
        "Claim amount: $2,000.01 to $7,500; Who must approve: Your manager and your department head",
        "Claim amount: Over $7,500; Who must approve: Manager, department head and the VP Finance",
        "When you get paid",
    ]


@pytest.mark.parametrize("v_align", ["MIDDLE", "TOP"])
def test_pdf_table_cell_wrapped_over_lines_stays_in_its_row(tmp_path: Path, v_align: str) -> None:
    """A long cell wraps inside its column; centred vertically, its first line even sits above its row's."""
    rows = [
        ["Scenario", "Revenue", "Main actions"],
        ["Downside", "$78.0M", "Delay 25 hires to H2; cut marketing programs by $2.5M"],
        ["Base", "$84.5M", "As budgeted"],
        ["Upside", "$89.0M", "Pull forward 10 sales hires into Q2"],
    ]
    path = write_pdf_with_table(tmp_path / "plan.pdf", "Scenarios", rows, "Reviewed quarterly.", (30, 30, 40), v_align)
    units = [u.text for u in answer_units(parse_file(path).sections[0].text)]
    downside = "Delay 25 hires to H2; cut marketing programs by $2.5M"
    assert f"Scenario: Downside; Revenue: $78.0M; Main actions: {downside}" in units
    assert "Scenario: Upside; Revenue: $89.0M; Main actions: Pull forward 10 sales hires into Q2" in units
    assert "Scenario: Base; Revenue: $84.5M; Main actions: As budgeted" in units


def test_pdf_two_column_page_is_read_column_by_column(tmp_path: Path) -> None:
    """Side by side, the lines of two columns of prose would read as rows of a table; they are read in order."""
    paragraphs = [f"Part {n}. " + " ".join(f"word{n}x{i}" for i in range(40)) + "." for n in range(12)]
    path = write_two_column_pdf(tmp_path / "newsletter.pdf", paragraphs)
    text = " ".join(" ".join(section.text for section in parse_file(path).sections).split())
    assert " | " not in text
    assert all(paragraph in text for paragraph in paragraphs)


def test_pdf_text_placed_far_off_the_page_reads_as_its_words(tmp_path: Path) -> None:
    """Layout mode places text by its coordinates: words millions of points apart are not millions of spaces."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    pdf.text(x=10, y=10, text="near")
    pdf.text(x=3e6, y=10, text="far")
    pdf.text(x=10, y=-3e6, text="low")
    path = tmp_path / "far.pdf"
    path.write_bytes(bytes(pdf.output()))
    (section,) = parse_file(path).sections
    assert sorted(section.text.split()) == ["far", "low", "near"] and len(section.text) < 20


def test_pdf_a_line_on_one_page_only_is_kept(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "plan.pdf", ["Summary of the plan.\nRevenue grows.", "Risks.\nChurn rises."])
    pages = [s.text for s in parse_file(path).sections]
    assert "Summary of the plan." in pages[0] and "Risks." in pages[1]


def test_pdf_blank_page_is_skipped_but_numbering_stays(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "gaps.pdf", ["First page text.", "", "Third page text."])
    assert [s.location for s in parse_file(path).sections] == ["p. 1", "p. 3"]


def test_pdf_with_owner_password_only_is_read(tmp_path: Path) -> None:
    """Permission-only protection (empty user password) opens in every viewer; so it ingests."""
    plain = write_pdf(tmp_path / "plain.pdf", ["Owner-protected but readable text."])
    protected = encrypt_pdf(plain, tmp_path / "protected.pdf", user_password="", owner_password="owner")
    assert "readable text" in parse_file(protected).sections[0].text


# --- DOCX -------------------------------------------------------------------------------------


def test_docx_heading_styles_and_tables_kept(tmp_path: Path) -> None:
    path = write_docx(
        tmp_path / "remote-work.docx",
        [
            ("heading1", "Remote work"),
            ("para", "Employees may work remotely up to 3 days a week."),
            ("heading2", "Equipment"),
            ("para", "The home-office budget is EUR 750 every 3 years."),
            ("table", [["Item", "Limit"], ["Monitor", "EUR 250"], ["Chair", "EUR 300"]]),
            ("heading2", "Security"),
            ("para", "Use the VPN on public networks."),
        ],
        title="Remote work and equipment",
    )
    parsed = parse_file(path)
    assert parsed.title == "Remote work and equipment"
    sections = by_location(parsed)
    equipment = sections["Remote work > Equipment"]
    assert "EUR 750 every 3 years" in equipment
    assert "Monitor | EUR 250" in equipment and "Chair | EUR 300" in equipment
    assert "VPN" in sections["Remote work > Security"]
    assert "3 days a week" in sections["Remote work"]


# --- encodings --------------------------------------------------------------------------------

CP1252_TEXT = (
    "Café policy – “naïve” guests pay €4.50 for a crème brûlée.\n"
    "Our façade reopens in Zürich on Tuesday; the São Paulo office keeps its hours.\n"
    "Employees’ reimbursements are processed within 14 days, per the finance team’s rules.\n"
)
CHINESE_TEXT = (
    "上海办公室报销政策\n"
    "员工因公出差产生的交通费、住宿费和餐费可以报销。\n"
    "单笔超过人民币五千元的报销需要部门经理和财务总监共同审批。\n"
    "报销申请必须在费用发生后三十天内提交，并附上发票原件。\n"
)


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        ("cp1252", CP1252_TEXT),
        ("gb18030", CHINESE_TEXT),
        ("utf-16", CHINESE_TEXT),  # with BOM
        ("utf-8-sig", CP1252_TEXT),
        (
            "shift_jis",
            "東京オフィスの勤務時間は午前九時から午後六時までです。\n会議室の予約は社内ポータルで行ってください。\n",
        ),
    ],
)
def test_non_utf8_text_decodes_to_the_right_characters(tmp_path: Path, encoding: str, text: str) -> None:
    path = tmp_path / f"notes-{encoding}.txt"
    path.write_bytes(text.encode(encoding))
    parsed = parse_file(path)
    assert [s.text for s in parsed.sections] == [text.strip()]


@pytest.mark.parametrize(
    ("encoding", "text"),
    [("cp1252", "Café"), ("latin-1", "naïve résumé"), ("gb18030", "报销政策"), ("cp1252", "Größe: 5 €")],
)
def test_short_legacy_text_is_not_mistaken_for_an_exotic_encoding(tmp_path: Path, encoding: str, text: str) -> None:
    """A few bytes fit many code pages; the common ones win (not UTF-16 Hanzi, cp1250 or EUC-KR)."""
    path = tmp_path / "short.txt"
    path.write_bytes(text.encode(encoding))
    assert parse_file(path).sections[0].text == text


def test_non_utf8_markdown_keeps_headings(tmp_path: Path) -> None:
    path = tmp_path / "zh.md"
    path.write_bytes(("# 报销政策\n\n## 审批\n\n" + CHINESE_TEXT).encode("gb18030"))
    sections = by_location(parse_file(path))
    assert "财务总监共同审批" in sections["报销政策 > 审批"]


# --- unusable input: one clear line each --------------------------------------------------------


def _refusal(path: Path) -> str:
    with pytest.raises(UnreadableDocument) as excinfo:
        parse_file(path)
    message = str(excinfo.value)
    assert message and "\n" not in message
    return message


def test_corrupt_pdf_refused(tmp_path: Path) -> None:
    assert "PDF" in _refusal(write_corrupt_pdf(tmp_path / "broken.pdf"))


def test_truncated_pdf_refused(tmp_path: Path) -> None:
    """Half a PDF (a failed download) must not ingest as half a document."""
    full = write_pdf(tmp_path / "full.pdf", [f"Page {i} of the handbook. " * 40 for i in range(1, 7)])
    assert "PDF" in _refusal(write_truncated_pdf(full, tmp_path / "truncated.pdf"))


def test_pdf_header_missing_refused(tmp_path: Path) -> None:
    path = tmp_path / "fake.pdf"
    path.write_text("just words", encoding="utf-8")
    assert "not a PDF" in _refusal(path)


def test_encrypted_pdf_refused(tmp_path: Path) -> None:
    plain = write_pdf(tmp_path / "plain.pdf", ["Salary bands for 2027."])
    message = _refusal(encrypt_pdf(plain, tmp_path / "locked.pdf"))
    assert "encrypted" in message


@pytest.mark.parametrize("content", [b"", b"   \n\t\n"])
def test_empty_file_refused(tmp_path: Path, content: bytes) -> None:
    for suffix in (".md", ".txt", ".pdf", ".docx", ".html"):
        path = tmp_path / f"empty{suffix}"
        path.write_bytes(content)
        assert "empty" in _refusal(path)


def test_unsupported_extension_refused(tmp_path: Path) -> None:
    path = tmp_path / "slides.pptx"
    path.write_bytes(b"PK\x03\x04 whatever")
    message = _refusal(path)
    assert "unsupported" in message and ".pptx" in message and ".pdf" in message


@pytest.mark.parametrize(
    "payload",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8,
        bytes((i * 7919) % 256 for i in range(8192)),
        b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + bytes(range(1, 256)) * 16,
    ],
    ids=["png", "noise", "elf"],
)
def test_binary_file_named_txt_refused(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(payload)
    assert "binary" in _refusal(path)


def test_binary_without_nul_bytes_named_md_refused(tmp_path: Path) -> None:
    path = tmp_path / "image.md"
    path.write_bytes(bytes(b for b in (bytes(range(1, 256)) * 40) if b not in (0x0A, 0x0D)))
    assert "binary" in _refusal(path)


def test_docx_that_is_not_a_zip_refused(tmp_path: Path) -> None:
    assert "not a zip" in _refusal(write_not_a_zip_docx(tmp_path / "letter.docx"))


def test_docx_zip_without_document_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty-package.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "not an office document")
    assert "DOCX" in _refusal(path)


def test_docx_zip_bomb_refused_from_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = write_docx_zip_bomb(tmp_path / "bomb.docx", inflated_mb=300)
    assert bomb.stat().st_size < 2_000_000 and zip_members_total(bomb) >= 300 * (1 << 20)
    opened: list[str] = []
    real_open = zipfile.ZipFile.open

    def recording_open(self, name, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(getattr(name, "filename", name))
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", recording_open)
    started = time.perf_counter()
    message = _refusal(bomb)
    assert "zip bomb" in message
    assert opened == [], f"members were opened (inflated) before refusing: {opened}"
    assert time.perf_counter() - started < 2


def test_docx_with_lying_sizes_cannot_inflate_past_its_declared_size(tmp_path: Path) -> None:
    """A bomb that under-declares its sizes (local header and central directory both say 4 KB; the part
    really inflates to 50 MB) passes every check made on the metadata, so what stops it is reading: no
    more than the declared size is ever inflated, and the checksum then fails, which is the reason given."""
    import tracemalloc

    liar = hostile.docx_lying_sizes(tmp_path / "liar.docx", inflated_mb=50, declared=4096)
    assert zip_members_total(liar) < 8192, "the sizes must lie, or the metadata checks refuse it first"
    assert liar.stat().st_size > 20_000  # ...so the ratio is far under the zip-bomb ratio, too
    started = time.perf_counter()
    tracemalloc.start()
    try:
        message = _refusal(liar)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "word/document.xml does not match its checksum" in message, message
    assert peak < 10 * (1 << 20), f"{peak / (1 << 20):.0f} MB allocated: the part was inflated past its declared size"
    assert time.perf_counter() - started < 2
