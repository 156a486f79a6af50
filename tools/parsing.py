"""Turn a file into text sections, each with a human location ("p. 3", "Leave > Parental leave").

Every parser raises `UnreadableDocument` with a one-line reason for input it cannot use; nothing
downstream ever sees half a file.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import charset_normalizer

SUPPORTED_SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx")
# A DOCX is a zip; refuse archives that would inflate past this (zip bombs).
MAX_DOCX_UNCOMPRESSED_BYTES = 200 * 1024 * 1024
MAX_DOCX_COMPRESSION_RATIO = 200


class UnreadableDocument(ValueError):
    """The file cannot be ingested; str(exc) is a one-line reason for people."""


@dataclass(frozen=True)
class Section:
    text: str
    location: str  # human-readable: a heading path or a page


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    sections: list[Section]

    @property
    def text_length(self) -> int:
        return sum(len(s.text) for s in self.sections)


def parse_file(path: Path, data: bytes | None = None) -> ParsedDocument:
    """Parse by extension. `data` lets callers pass bytes they already read (and hashed)."""
    suffix = path.suffix.lower()
    parser = _PARSERS.get(suffix)
    if parser is None:
        raise UnreadableDocument(
            f"unsupported file type {suffix or '(none)'!r}; supported: {', '.join(SUPPORTED_SUFFIXES)}"
        )
    raw = path.read_bytes() if data is None else data
    if not raw.strip():
        raise UnreadableDocument("the file is empty")
    try:
        parsed = parser(raw, path)
    except UnreadableDocument:
        raise
    except RecursionError as exc:
        raise UnreadableDocument(f"the {suffix[1:].upper()} file is malformed (nested too deeply)") from exc
    except Exception as exc:  # a parser library choking on hostile input must not take the process down
        detail = " ".join(str(exc).split())[:120]
        raise UnreadableDocument(
            f"the {suffix[1:].upper()} file could not be read ({type(exc).__name__}{': ' + detail if detail else ''})"
        ) from exc
    sections = [Section(_normalise_space(s.text), s.location) for s in parsed.sections]
    sections = [s for s in sections if s.text]
    if not sections:
        raise UnreadableDocument("no text could be extracted (scanned or image-only document?)")
    return ParsedDocument(parsed.title or path.stem, sections)


def _normalise_space(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ")
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" +([.,;:!?)])(?=\s|$)", r"\1", text)  # "leave ." from inline markup → "leave."
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# --- text -------------------------------------------------------------------------------------


def decode_text(raw: bytes) -> str:
    """Decode bytes of unknown encoding; refuse binary data."""
    if b"\x00" in raw[:8192] and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UnreadableDocument("the file looks binary, not text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    best = _best_legacy_decoding(raw)
    if best is None:
        raise UnreadableDocument("the file looks binary, not text (no text encoding fits)")
    text = str(best)
    control = sum(1 for ch in text if ord(ch) < 32 and ch not in "\n\r\t\f")
    if control > max(8, len(text) // 100):
        raise UnreadableDocument("the file looks binary, not text")
    return text


# Legacy encodings people's files really come in, most likely first. Detection considers only these
# (exotic code pages win on short inputs otherwise: "Café" came out as UTF-16 Hanzi) and, when several
# fit equally well, takes the earliest: "naïve résumé" is cp1252, not cp1250's "naďve".
_LEGACY_ENCODINGS = (
    "cp1252", "iso8859_15", "latin_1", "cp1250", "iso8859_2", "gb18030", "big5", "shift_jis", "euc_jp",
    "euc_kr", "cp1251", "koi8_r", "cp1253", "cp1254", "cp1257", "cp1255", "cp1256", "mac_roman",
)
_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


def _best_legacy_decoding(raw: bytes):
    candidates = list(_LEGACY_ENCODINGS) + (["utf_16", "utf_32"] if raw.startswith(_BOMS) else [])
    matches = list(charset_normalizer.from_bytes(raw, cp_isolation=candidates))
    if not matches:
        return None
    least_chaos = min(m.chaos for m in matches)
    fitting = [m for m in matches if m.chaos <= least_chaos + 1e-6]
    most_coherent = max(m.coherence for m in fitting)
    tied = [m for m in fitting if m.coherence >= most_coherent - 1e-6]

    def rank(match) -> int:
        names = [match.encoding, *match.could_be_from_charset]
        return min((candidates.index(n) for n in names if n in candidates), default=len(candidates))

    return min(tied, key=rank)


def _parse_text(raw: bytes, path: Path) -> ParsedDocument:
    return ParsedDocument(path.stem, [Section(decode_text(raw), path.name)])


# --- markdown ---------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _parse_markdown(raw: bytes, path: Path) -> ParsedDocument:
    text = decode_text(raw)
    return _sections_from_headed_lines(text.splitlines(), path.stem)


def _sections_from_headed_lines(lines: list[str], fallback_title: str) -> ParsedDocument:
    """Split Markdown-like lines at headings, tracking the heading path (code fences respected)."""
    title = ""
    path_stack: list[tuple[int, str]] = []
    sections: list[Section] = []
    buffer: list[str] = []
    in_fence = False

    def flush() -> None:
        body = "\n".join(buffer).strip()
        buffer.clear()
        if body:
            location = " > ".join(h for _, h in path_stack) or title or fallback_title
            sections.append(Section(body, location))

    for line in lines:
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            buffer.append(line)
            continue
        flush()
        level, heading = len(match.group(1)), _strip_inline_markdown(match.group(2))
        if level == 1 and not title:
            title = heading
        while path_stack and path_stack[-1][0] >= level:
            path_stack.pop()
        path_stack.append((level, heading))
    flush()
    return ParsedDocument(title or fallback_title, sections)


def _strip_inline_markdown(text: str) -> str:
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    return re.sub(r"[*_`]+", "", text).strip()


# --- html -------------------------------------------------------------------------------------

_BOILERPLATE_TAGS = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "iframe", "svg")
_BOILERPLATE_HINT = re.compile(r"cookie|consent|banner|breadcrumb|sidebar|menu|navbar|footer|skip-link", re.I)


def _parse_html(raw: bytes, path: Path) -> ParsedDocument:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode_text(raw), "html.parser")
    page_title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(_BOILERPLATE_TAGS):
        tag.decompose()
    for tag in soup.find_all(attrs={"role": ("navigation", "banner", "contentinfo")}):
        tag.decompose()
    for tag in soup.find_all(True):
        if tag.attrs is None:  # already removed with an ancestor
            continue
        marker = " ".join([tag.get("id") or "", *(tag.get("class") or [])])
        if marker.strip() and _BOILERPLATE_HINT.search(marker) and tag.name not in ("html", "body", "main"):
            tag.decompose()
    articles = soup.find_all("article")
    root = soup.find("main") or (articles[0] if len(articles) == 1 else None) or soup.body or soup
    lines = _html_block_lines(root)
    parsed = _sections_from_headed_lines(lines, page_title or path.stem)
    return ParsedDocument(parsed.title if parsed.title != path.stem else (page_title or path.stem), parsed.sections)


_HTML_BLOCKS = ("h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "tr", "dt", "dd", "blockquote", "caption", "figcaption")
_HTML_INLINE = frozenset(
    ["a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font", "i", "img", "ins", "kbd", "label", "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u", "var", "wbr"]
)


def _html_block_lines(root) -> list[str]:
    """One Markdown-like line per block (headings as `#`), in document order.

    Text that sits outside any block element (straight in a <div>, between <br>s, in <main>) is
    gathered into its own lines too: wiki and CMS exports put most of their text there.
    """
    from bs4 import Comment, Declaration, Doctype, NavigableString, ProcessingInstruction, Tag

    lines: list[str] = []
    loose: list[str] = []

    def emit(text: str) -> None:
        lines.append(text)
        lines.append("")

    def flush() -> None:
        text = " ".join(" ".join(loose).split())
        loose.clear()
        if text:
            emit(text)

    def block_text(element: Tag) -> str:
        if element.name == "tr":
            # A table row is one line, cells separated, so a row's facts stay together.
            return " | ".join(c.get_text(" ", strip=True) for c in element.find_all(["td", "th"]))
        return element.get_text(" ", strip=True)

    def walk(node: Tag) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                if not isinstance(child, (Comment, Declaration, Doctype, ProcessingInstruction)):
                    loose.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            if child.name in _HTML_BLOCKS:
                flush()
                text = block_text(child)
                if not text.strip(" |"):
                    continue
                if child.name[0] == "h" and child.name[1:].isdigit():
                    emit("#" * int(child.name[1]) + " " + text)
                elif child.name == "li":
                    emit("- " + text)
                else:
                    emit(text)
            elif child.name == "br":
                flush()
            elif child.name in _HTML_INLINE:
                loose.append(child.get_text(" "))
            else:  # div, section, table, ul...: a boundary, then whatever is inside
                flush()
                walk(child)
                flush()

    walk(root)
    flush()
    return lines


# --- pdf --------------------------------------------------------------------------------------


def _parse_pdf(raw: bytes, path: Path) -> ParsedDocument:
    import io
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)  # its repair notes are not for users
    if not raw.lstrip().startswith(b"%PDF"):
        raise UnreadableDocument("not a PDF file (no %PDF header)")
    try:
        reader = PdfReader(io.BytesIO(raw))
        # Permission-only protection (an empty user password) opens in every viewer, so read it.
        if reader.is_encrypted and not _decrypts_with_empty_password(reader):
            raise UnreadableDocument("the PDF is encrypted (password protected); upload an unprotected copy")
        sections = [
            Section(_join_pdf_lines(page.extract_text() or ""), f"p. {number}")
            for number, page in enumerate(reader.pages, start=1)
        ]
        title = (reader.metadata.title if reader.metadata else None) or path.stem
    except UnreadableDocument:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError,
            NotImplementedError, ArithmeticError, LookupError, AssertionError) as exc:
        raise UnreadableDocument(f"corrupt PDF ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from exc
    return ParsedDocument(str(title), sections)


def _decrypts_with_empty_password(reader) -> bool:
    from pypdf import PasswordType

    try:
        return reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except Exception:  # an unsupported algorithm or a broken /Encrypt dictionary: still encrypted
        return False


_PDF_BLOCK_START = re.compile(r"^\s*(?:[-•*▪◦]|\d{1,2}[.)]\s|[A-Z][A-Za-z ]{0,40}$)")


def _join_pdf_lines(text: str) -> str:
    """PDF text breaks lines where the layout did; rejoin lines that continue a sentence.

    A line ends a block when it ends with sentence punctuation or a colon, or the next line starts a
    list item. Short title-like lines stay on their own (headings).
    """
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if not line.strip():
            out.append("")
            continue
        previous = out[-1] if out else ""
        continues = previous.endswith(",") or line.lstrip()[:1].islower()
        if previous and not re.search(r"[.!?:;。！？：]$", previous) and not _PDF_BLOCK_START.match(line) \
                and (len(previous) > 40 or continues):
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line)
    return "\n".join(out)


# --- docx -------------------------------------------------------------------------------------


def _check_zip_is_safe(raw: bytes) -> None:
    import io

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise UnreadableDocument("not a valid DOCX (the file is not a zip archive)") from exc
    uncompressed = sum(info.file_size for info in infos)
    compressed = max(1, sum(info.compress_size for info in infos))
    if uncompressed > MAX_DOCX_UNCOMPRESSED_BYTES or uncompressed / compressed > MAX_DOCX_COMPRESSION_RATIO:
        raise UnreadableDocument(
            f"refused: the DOCX would inflate to {uncompressed / 1e6:.0f} MB (zip bomb?)"
        )


def _parse_docx(raw: bytes, path: Path) -> ParsedDocument:
    import io

    import docx
    from docx.opc.exceptions import PackageNotFoundError

    _check_zip_is_safe(raw)
    try:
        document = docx.Document(io.BytesIO(raw))
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise UnreadableDocument(f"corrupt DOCX ({type(exc).__name__})") from exc
    except Exception as exc:  # lxml raises its own XML errors on damaged parts
        raise UnreadableDocument(f"corrupt DOCX ({type(exc).__name__})") from exc

    lines: list[str] = []
    body = document.element.body
    for child in body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = docx.text.paragraph.Paragraph(child, document)
            text = paragraph.text.strip()
            if not text:
                continue
            style = (paragraph.style.name if paragraph.style is not None else "") or ""
            level = _heading_level(style)
            lines.append(("#" * level + " " + text) if level else text)
            lines.append("")
        elif tag == "tbl":
            table = docx.table.Table(child, document)
            for row in table.rows:
                cells = [cell.text.strip() for cell in row.cells]
                # merged cells repeat; keep each distinct cell once, in order
                lines.append(" | ".join(dict.fromkeys(c for c in cells if c)))
            lines.append("")
    core_title = (document.core_properties.title or "").strip()
    parsed = _sections_from_headed_lines(lines, core_title or path.stem)
    return ParsedDocument(core_title or parsed.title, parsed.sections)


def _heading_level(style_name: str) -> int:
    if style_name == "Title":
        return 1
    match = re.match(r"Heading (\d)", style_name)
    return int(match.group(1)) if match else 0


_PARSERS: dict[str, Callable[[bytes, Path], ParsedDocument]] = {
    ".md": _parse_markdown,
    ".markdown": _parse_markdown,
    ".txt": _parse_text,
    ".html": _parse_html,
    ".htm": _parse_html,
    ".pdf": _parse_pdf,
    ".docx": _parse_docx,
}
