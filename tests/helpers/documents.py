"""Generate real documents in tests: PDF (fpdf2, optionally encrypted with pypdf), DOCX (python-docx),
and hostile files (corrupt PDF, DOCX that is not a zip, DOCX zip bomb).

Every function writes the file and returns its path, so a test reads like the input it describes.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from pathlib import Path


def write_pdf(path: Path, pages: Sequence[str], title: str | None = None) -> Path:
    """A text PDF with one string per page (Latin-1 text; core Helvetica font)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    if title:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    path.write_bytes(bytes(pdf.output()))
    return path


def write_pdf_with_table(
    path: Path,
    before: str,
    rows: Sequence[Sequence[str]],
    after: str,
    col_widths: Sequence[int] | None = None,
    v_align: str = "MIDDLE",
) -> Path:
    """A one-page PDF: a paragraph, a table whose first row names its columns (fpdf2's table, as the sample
    documents draw theirs; a long cell wraps inside its column), and a paragraph after it."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.multi_cell(0, 5, before, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(2)
    with pdf.table(col_widths=col_widths, text_align="LEFT", line_height=5, v_align=v_align) as table:
        for row in rows:
            cells = table.row()
            for cell in row:
                cells.cell(cell)
    pdf.ln(2)
    pdf.multi_cell(0, 5, after, new_x="LMARGIN", new_y="NEXT")
    path.write_bytes(bytes(pdf.output()))
    return path


def write_two_column_pdf(path: Path, paragraphs: Sequence[str]) -> Path:
    """A page of prose set in two columns (a newsletter, a paper)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    with pdf.text_columns(ncols=2, gutter=8) as columns:
        for paragraph in paragraphs:
            columns.write(text=paragraph)
            columns.ln()
    path.write_bytes(bytes(pdf.output()))
    return path


def encrypt_pdf(source: Path, target: Path, user_password: str = "s3cret", owner_password: str = "owner") -> Path:
    """A copy of a PDF that needs `user_password` to open (AES-256)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(source))
    writer.encrypt(user_password=user_password, owner_password=owner_password, algorithm="AES-256")
    with target.open("wb") as handle:
        writer.write(handle)
    return target


def write_docx(
    path: Path,
    blocks: Sequence[tuple[str, object]],
    title: str | None = None,
) -> Path:
    """A DOCX from ("heading1".."heading3" | "para" | "table", content) blocks.

    A table's content is a list of rows (lists of cell strings); the first row uses the default style.
    """
    import docx

    document = docx.Document()
    if title:
        document.core_properties.title = title
    for kind, content in blocks:
        if kind.startswith("heading"):
            document.add_heading(str(content), level=int(kind[-1]))
        elif kind == "para":
            document.add_paragraph(str(content))
        elif kind == "table":
            rows = list(content)  # type: ignore[call-overload]
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = str(cell)
        else:
            raise ValueError(f"unknown block kind {kind!r}")
    document.save(str(path))
    return path


def write_corrupt_pdf(path: Path) -> Path:
    """Starts like a PDF, then garbage: no xref, no objects pypdf can use."""
    path.write_bytes(
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\n" + b"\x8f\x03garbage" * 200
    )
    return path


def write_truncated_pdf(source: Path, target: Path) -> Path:
    """A real PDF cut in half (a failed download)."""
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


def write_not_a_zip_docx(path: Path) -> Path:
    path.write_bytes(b"This is plain text pretending to be a Word document.\n" * 20)
    return path


def write_docx_zip_bomb(path: Path, inflated_mb: int = 300) -> Path:
    """A DOCX-shaped zip whose document.xml inflates to `inflated_mb` MB of zeros.

    Written in streaming fashion so neither memory nor disk ever holds the inflated bytes
    (100 MB of zeros deflates to about 100 KB).
    """
    block = b"\0" * (1 << 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument'
            '.wordprocessingml.document.main+xml"/></Types>',
        )
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(inflated_mb):
                member.write(block)
    return path


def zip_members_total(path: Path) -> int:
    """The uncompressed size a zip declares (what a bomb would inflate to)."""
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as archive:
        return sum(info.file_size for info in archive.infolist())
