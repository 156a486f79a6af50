"""Hostile files, built in the test that uses them (no binaries in the repo): PDF bombs, page-tree
liars, DOCX zip/XML/entity bombs and liars, markup nested 100,000 deep.

Each function writes the file and returns its path; each is small on disk and cheap to build.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

from helpers.documents import write_docx

_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
_PAGE = (
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>"
)


def pdf_from_objects(objects: list[bytes]) -> bytes:
    """A PDF of these object bodies (numbered from 1, object 1 the catalog) with a correct xref table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _flate_stream(data: bytes) -> bytes:
    packed = zlib.compress(data, 9)
    return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream"


def _one_page_pdf(content: bytes, declared_pages: int = 1) -> bytes:
    return pdf_from_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count %d >>" % declared_pages,
            _PAGE,
            _flate_stream(content),
            _FONT,
        ]
    )


def pdf_stream_bomb(path: Path, inflated_mb: int = 200) -> Path:
    """A ~200 KB PDF whose one content stream inflates to `inflated_mb` MB."""
    path.write_bytes(_one_page_pdf(b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET\n" + b" " * (inflated_mb << 20)))
    return path


def pdf_slow_content(path: Path, operations: int = 600_000) -> Path:
    """A small PDF (tens of KB) whose one page holds `operations` text-showing operators: every limit of
    the PDF reader admits it, and extracting its text takes tens of seconds."""
    path.write_bytes(_one_page_pdf(b"BT /F1 12 Tf 72 720 Td " + b"(word ) Tj " * operations + b"ET\n"))
    return path


def pdf_declaring_pages(path: Path, pages: int = 100_000) -> Path:
    """A one-page PDF whose page tree claims `pages` pages."""
    path.write_bytes(_one_page_pdf(b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET", declared_pages=pages))
    return path


def pdf_with_shared_pages(path: Path, pages: int = 5000, fanout: int = 500, declared: int = 1) -> Path:
    """A PDF with `pages` real pages, all one page object referenced again and again (a few KB), whose
    root claims `declared` pages: only walking the tree shows how many there are."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Page /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        _flate_stream(b"BT /F1 12 Tf 72 720 Td (The same page again.) Tj ET"),
        _FONT,
    ]
    kids = []
    for start in range(0, pages, fanout):
        count = min(fanout, pages - start)
        objects.append(
            b"<< /Type /Pages /Parent 2 0 R /Kids [" + b" ".join([b"3 0 R"] * count) + b"] /Count %d >>" % count
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % declared
    path.write_bytes(pdf_from_objects(objects))
    return path


def _replace_member(source: Path, target: Path, member: str, data: bytes) -> Path:
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, data if info.filename == member else zin.read(info.filename))
    return target


def docx_entity_bomb(path: Path, levels: int = 9) -> Path:
    """A DOCX whose document.xml declares "billion laughs" entities (10^levels expansions)."""
    base = write_docx(path.with_name(path.stem + "-base.docx"), [("para", "LAUGH-HERE")])
    xml = zipfile.ZipFile(base).read("word/document.xml").decode("utf-8")
    entities = '<!ENTITY e0 "ha">' + "".join(f'<!ENTITY e{i} "{f"&e{i - 1};" * 10}">' for i in range(1, levels + 1))
    prolog_end = xml.index("?>") + 2
    xml = xml[:prolog_end] + f"<!DOCTYPE w:document [{entities}]>" + xml[prolog_end:]
    return _replace_member(base, path, "word/document.xml", xml.replace("LAUGH-HERE", f"&e{levels};").encode())


def docx_deep_xml(path: Path, depth: int = 100_000) -> Path:
    """A DOCX whose document.xml nests `depth` elements (compresses well below the bomb ratio)."""
    base = write_docx(path.with_name(path.stem + "-base.docx"), [("para", "DEEP-HERE")])
    xml = zipfile.ZipFile(base).read("word/document.xml").decode("utf-8")
    xml = xml.replace("DEEP-HERE", "deep</w:t></w:r>" + "<w:r>" * depth + "</w:r>" * depth + "<w:r><w:t>end")
    with zipfile.ZipFile(base) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():  # stored, not deflated: the point is depth, not the ratio
            zout.writestr(
                info.filename, xml.encode() if info.filename == "word/document.xml" else zin.read(info.filename)
            )
    return path


def docx_lying_sizes(path: Path, inflated_mb: int = 50, declared: int = 4096) -> Path:
    """A DOCX-shaped zip whose document.xml inflates to `inflated_mb` MB but whose local header and central
    directory both declare `declared` bytes: every size check on the metadata passes."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        with archive.open("word/document.xml", "w") as member:
            for _ in range(inflated_mb):
                member.write(b"\0" * (1 << 20))
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        info = archive.getinfo("word/document.xml")
    # Local file header: uncompressed size at offset 22. Central directory entry: at offset 24.
    assert data[info.header_offset : info.header_offset + 4] == b"PK\x03\x04"
    struct.pack_into("<I", data, info.header_offset + 22, declared)
    central = 0
    name = b"word/document.xml"
    while True:  # the central directory entry of that member
        central = data.index(b"PK\x01\x02", central)
        length = struct.unpack_from("<H", data, central + 28)[0]
        if bytes(data[central + 46 : central + 46 + length]) == name:
            break
        central += 4
    struct.pack_into("<I", data, central + 24, declared)
    path.write_bytes(bytes(data))
    return path


def deep_html(path: Path, depth: int = 100_000) -> Path:
    path.write_text(
        "<html><body>" + "<div>" * depth + "deep text" + "</div>" * depth + "</body></html>", encoding="utf-8"
    )
    return path


def zip_named_pdf(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "a zip archive, not a PDF")
    return path
