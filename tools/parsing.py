"""Turn a file into text sections, each with a human location ("p. 3", "Leave > Parental leave").

Every parser raises `UnreadableDocument` with a one-line reason for input it cannot use; nothing
downstream ever sees half a file. What one file may cost is bounded by `ParseLimits`: a file over a
limit is refused with a message naming the limit and its setting. The limits that pure-Python parsing
cannot enforce on itself (wall time, memory) are enforced by running it in a worker process
(tools/parse_worker.py); everything else is checked here, as early as it can be.
"""

from __future__ import annotations

import re
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import charset_normalizer

from tools import pdf_layout
from tools.text import is_table_row

SUPPORTED_SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx")

_MB = 1 << 20


@dataclass(frozen=True)
class ParseLimits:
    """What parsing one file may cost. Each limit names the setting people change it with (the names in
    the comments); the defaults admit any real document we have met, and refuse hostile ones early."""

    max_pdf_pages: int = 2000  # KBBOT_MAX_PDF_PAGES: pages of one PDF (declared or real)
    timeout_s: float = 60.0  # KBBOT_PARSE_TIMEOUT_S: wall time to parse one file (the worker is killed)
    max_memory_mb: int = 2048  # KBBOT_PARSE_MAX_MEMORY_MB: address space of the parsing worker
    max_inflated_mb: float = 100.0  # KBBOT_MAX_INFLATED_MB: a DOCX's members in total; each PDF stream
    max_compression_ratio: float = 200.0  # (no setting) a DOCX inflating more than this many times is a bomb
    max_nesting_depth: int = 256  # KBBOT_MAX_NESTING_DEPTH: nested HTML elements / XML elements
    max_chars: int = 5_000_000  # KBBOT_MAX_DOCUMENT_CHARS: extracted text of one document

    @property
    def max_inflated_bytes(self) -> int:
        return int(self.max_inflated_mb * _MB)

    # One-line refusals, each naming the limit and its setting.
    def pages_refusal(self, pages: int, declared: bool = False) -> str:
        verb = "declares" if declared else "has"
        return f"the PDF {verb} {pages:,} pages, over the limit of {self.max_pdf_pages:,} pages (KBBOT_MAX_PDF_PAGES)"

    def timeout_refusal(self) -> str:
        return f"parsing took longer than the limit of {self.timeout_s:g} s (KBBOT_PARSE_TIMEOUT_S)"

    def memory_refusal(self) -> str:
        return f"parsing needed more memory than the limit of {self.max_memory_mb:,} MB (KBBOT_PARSE_MAX_MEMORY_MB)"

    def chars_refusal(self) -> str:
        return (
            f"the document has more than {self.max_chars:,} characters of text, over the limit "
            f"(KBBOT_MAX_DOCUMENT_CHARS)"
        )

    def depth_refusal(self, kind: str) -> str:
        return (
            f"the {kind} nests elements more than {self.max_nesting_depth} levels deep, over the limit "
            f"(KBBOT_MAX_NESTING_DEPTH)"
        )

    def inflated_refusal(self, what: str, size: int | None = None, cap: int | None = None) -> str:
        cap_mb = (cap if cap is not None else self.max_inflated_bytes) / _MB
        if size is None:
            return f"{what} inflates past the limit of {cap_mb:,.4g} MB (KBBOT_MAX_INFLATED_MB); zip bomb?"
        return (
            f"{what} would inflate to {size / _MB:,.0f} MB, over the limit of {cap_mb:,.4g} MB "
            f"(KBBOT_MAX_INFLATED_MB); zip bomb?"
        )


DEFAULT_LIMITS = ParseLimits()


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


def unsupported_type(suffix: str) -> str:
    return f"unsupported file type {suffix or '(none)'!r}; supported: {', '.join(SUPPORTED_SUFFIXES)}"


def precheck(path: Path, raw: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> None:
    """The cheap refusals, from the name and the file's own metadata, before anything is inflated or
    parsed (callers run this in-process, then parse in a worker)."""
    suffix = path.suffix.lower()
    if suffix not in _PARSERS:
        raise UnreadableDocument(unsupported_type(suffix))
    if not raw.strip():
        raise UnreadableDocument("the file is empty")
    if suffix == ".docx":
        _check_zip_is_safe(raw, limits)
    elif suffix == ".pdf" and not raw.lstrip().startswith(b"%PDF"):
        raise UnreadableDocument("not a PDF file (no %PDF header)")


def parse_file(path: Path, data: bytes | None = None, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """Parse by extension. `data` lets callers pass bytes they already read (and hashed).

    Enforces every limit but wall time and memory, which need a worker process (tools/parse_worker.py:
    parse_isolated). PDF parsing also stops itself once past `limits.timeout_s`.
    """
    suffix = path.suffix.lower()
    raw = path.read_bytes() if data is None else data
    precheck(path, raw, limits)
    parser = _PARSERS[suffix]
    try:
        parsed = parser(raw, path, limits)
    except (UnreadableDocument, MemoryError):
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
    if sum(len(s.text) for s in sections) > limits.max_chars:
        raise UnreadableDocument(limits.chars_refusal())
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
        text = _utf16_without_bom(raw)
        if text is None:
            raise UnreadableDocument("the file looks binary, not text")
        return text
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


def _utf16_without_bom(raw: bytes) -> str | None:
    """UTF-16 text saved without a byte-order mark (Latin script: every other byte is NUL), or None."""
    sample = raw[: 8192 - 8192 % 2] if len(raw) >= 8192 else raw[: len(raw) - len(raw) % 2]
    half = len(sample) // 2
    if half < 2 or len(raw) % 2:
        return None
    even_nuls, odd_nuls = sample[0::2].count(0), sample[1::2].count(0)
    if odd_nuls >= half * 0.3 and even_nuls <= half * 0.02:
        encoding = "utf-16-le"
    elif even_nuls >= half * 0.3 and odd_nuls <= half * 0.02:
        encoding = "utf-16-be"
    else:
        return None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        return None
    control = sum(1 for ch in text[:8192] if ord(ch) < 32 and ch not in "\n\r\t\f")
    return None if control > max(8, min(len(text), 8192) // 100) else text


# Legacy encodings people's files really come in, most likely first. Detection considers only these
# (exotic code pages win on short inputs otherwise: "Café" came out as UTF-16 Hanzi) and, when several
# fit equally well, takes the earliest: "naïve résumé" is cp1252, not cp1250's "naďve".
_LEGACY_ENCODINGS = (
    "cp1252",
    "iso8859_15",
    "latin_1",
    "cp1250",
    "iso8859_2",
    "gb18030",
    "big5",
    "shift_jis",
    "euc_jp",
    "euc_kr",
    "cp1251",
    "koi8_r",
    "cp1253",
    "cp1254",
    "cp1257",
    "cp1255",
    "cp1256",
    "mac_roman",
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


def _decode_within(raw: bytes, limits: ParseLimits) -> str:
    text = decode_text(raw)
    if len(text) > limits.max_chars:  # before any per-line work (a 25 MB single line, say)
        raise UnreadableDocument(limits.chars_refusal())
    return text


def _parse_text(raw: bytes, path: Path, limits: ParseLimits) -> ParsedDocument:
    return ParsedDocument(path.stem, [Section(_decode_within(raw, limits), path.name)])


# --- markdown ---------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _parse_markdown(raw: bytes, path: Path, limits: ParseLimits) -> ParsedDocument:
    text = _decode_within(raw, limits)
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


# Elements that never nest (void) or whose end tag may be left out: they do not count towards depth.
_HTML_UNCOUNTED = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
        "p",
        "li",
        "dt",
        "dd",
        "tr",
        "td",
        "th",
        "thead",
        "tbody",
        "tfoot",
        "colgroup",
        "caption",
        "option",
        "optgroup",
        "rb",
        "rt",
        "rp",
        "head",
        "body",
        "html",
    ]
)
_HTML_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)([^<>]*)>")
_HTML_RAW_TEXT = {"script": re.compile(r"</script\s*>", re.I), "style": re.compile(r"</style\s*>", re.I)}


def _check_html_depth(text: str, limits: ParseLimits) -> None:
    """Refuse markup nested deeper than the limit, from a scan of its tags, before a tree is built
    (100,000 nested <div>s cost seconds and hundreds of MB to build, and then cannot be walked)."""
    stack: list[str] = []
    position = 0
    while True:
        match = _HTML_TAG.search(text, position)
        if match is None:
            return
        position = match.end()
        closing, name = match.group(1), match.group(2).lower()
        if closing:
            for depth in range(len(stack) - 1, -1, -1):  # like the parser: close up to the open one
                if stack[depth] == name:
                    del stack[depth:]
                    break
            continue
        if name in _HTML_RAW_TEXT:
            end = _HTML_RAW_TEXT[name].search(text, position)
            position = end.end() if end else len(text)
            continue
        if name in _HTML_UNCOUNTED or match.group(3).endswith("/"):
            continue
        stack.append(name)
        if len(stack) > limits.max_nesting_depth:
            raise UnreadableDocument(limits.depth_refusal("HTML"))


def _parse_html(raw: bytes, path: Path, limits: ParseLimits) -> ParsedDocument:
    from bs4 import BeautifulSoup

    text = _decode_within(raw, limits)
    _check_html_depth(text, limits)
    soup = BeautifulSoup(text, "html.parser")
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
    lines = _html_block_lines(root, limits.max_nesting_depth)
    parsed = _sections_from_headed_lines(lines, page_title or path.stem)
    return ParsedDocument(parsed.title if parsed.title != path.stem else (page_title or path.stem), parsed.sections)


_HTML_BLOCKS = (
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "p",
    "li",
    "pre",
    "tr",
    "dt",
    "dd",
    "blockquote",
    "caption",
    "figcaption",
)
_HTML_INLINE = frozenset(
    [
        "a",
        "abbr",
        "b",
        "bdi",
        "bdo",
        "big",
        "cite",
        "code",
        "data",
        "del",
        "dfn",
        "em",
        "font",
        "i",
        "img",
        "ins",
        "kbd",
        "label",
        "mark",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strike",
        "strong",
        "sub",
        "sup",
        "time",
        "tt",
        "u",
        "var",
        "wbr",
    ]
)


def _html_block_lines(root, max_depth: int = DEFAULT_LIMITS.max_nesting_depth) -> list[str]:
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

    def walk(node: Tag, depth: int = 0) -> None:
        if depth > max_depth:
            raise UnreadableDocument(ParseLimits(max_nesting_depth=max_depth).depth_refusal("HTML"))
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
                walk(child, depth + 1)
                flush()

    walk(root)
    flush()
    return lines


# --- pdf --------------------------------------------------------------------------------------


def _parse_pdf(raw: bytes, path: Path, limits: ParseLimits) -> ParsedDocument:
    import io
    import logging

    from pypdf import PdfReader, apply_configuration, get_configuration
    from pypdf.errors import LimitReachedError, PyPdfError

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)  # its repair notes are not for users
    if not raw.lstrip().startswith(b"%PDF"):
        raise UnreadableDocument("not a PDF file (no %PDF header)")
    deadline = time.monotonic() + limits.timeout_s
    # pypdf's own output caps per stream (75 MB by default), lowered to ours when ours is lower.
    inflated = min(limits.max_inflated_bytes, get_configuration().zlib_maximum_output_length)
    caps = {
        name: inflated
        for name in (
            "zlib_maximum_output_length",
            "lzw_maximum_output_length",
            "run_length_maximum_output_length",
            "brotli_maximum_output_length",
            "array_based_stream_maximum_output_length",
        )
        if getattr(get_configuration(), name, None) is not None and getattr(get_configuration(), name) > inflated
    }
    try:
        with apply_configuration(**caps):
            reader = PdfReader(io.BytesIO(raw))
            # Permission-only protection (an empty user password) opens in every viewer, so read it.
            if reader.is_encrypted and not _decrypts_with_empty_password(reader):
                raise UnreadableDocument("the PDF is encrypted (password protected); upload an unprotected copy")
            declared = _declared_page_count(reader)
            if declared > limits.max_pdf_pages:  # refused before the page tree is even walked
                raise UnreadableDocument(limits.pages_refusal(declared, declared=True))
            if len(reader.pages) > limits.max_pdf_pages:
                raise UnreadableDocument(limits.pages_refusal(len(reader.pages)))
            pages, chars = [], 0
            for page in reader.pages:
                if time.monotonic() > deadline:
                    raise UnreadableDocument(limits.timeout_refusal())
                pages.append(_pdf_page_lines(page))
                chars += sum(len(line) + 1 for line in pages[-1])
                if chars > limits.max_chars:
                    raise UnreadableDocument(limits.chars_refusal())
            sections = [
                Section(_join_pdf_lines("\n".join(lines)), f"p. {number}")
                for number, lines in enumerate(_without_running_lines(pages), start=1)
            ]
            title = (reader.metadata.title if reader.metadata else None) or path.stem
    except UnreadableDocument:
        raise
    except LimitReachedError as exc:
        detail = " ".join(str(exc).split())[:120]
        if "decompress" in detail.lower() or "output length" in detail.lower():
            raise UnreadableDocument(limits.inflated_refusal("a stream in the PDF", cap=inflated)) from exc
        raise UnreadableDocument(f"the PDF is over a safety limit of the PDF reader ({detail})") from exc
    except (
        PyPdfError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
        OSError,
        NotImplementedError,
        ArithmeticError,
        LookupError,
        AssertionError,
    ) as exc:
        raise UnreadableDocument(f"corrupt PDF ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from exc
    return ParsedDocument(str(title), sections)


def _pdf_page_lines(page) -> list[str]:
    """A page's lines, its tables as rows of cells (tools/pdf_layout); a page set in two columns, or one that
    pypdf's layout mode cannot place, as plain extraction reads it."""
    from pypdf.errors import LimitReachedError

    try:
        layout = page.extract_text(extraction_mode="layout") or ""
    except LimitReachedError:
        raise
    except Exception:  # a font or operator layout mode cannot place: plain extraction still reads the text
        layout = None
    lines = pdf_layout.page_lines(layout) if layout is not None else None
    return lines if lines is not None else (page.extract_text() or "").splitlines()


def _declared_page_count(reader) -> int:
    """The page count the PDF claims (/Root /Pages /Count), read without walking the page tree."""
    try:
        count = reader.trailer["/Root"]["/Pages"].get("/Count", 0)
        return max(0, int(count))
    except Exception:  # no usable claim: the real count is checked next
        return 0


def _decrypts_with_empty_password(reader) -> bool:
    from pypdf import PasswordType

    try:
        return reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except Exception:  # an unsupported algorithm or a broken /Encrypt dictionary: still encrypted
        return False


# Page furniture: a line at the top or bottom of most pages that is the same but for its numbers ("Page 2 of 3",
# "CONFIDENTIAL - FY2027 Financial Plan"). Glued to a page's first sentence it read as part of the answer.
_PAGE_EDGE = 2  # lines from the top and from the bottom of a page where a running line may sit
_PAGE_NUMBER = re.compile(r"^(?:page\s*)?#(?:\s*(?:of|/)\s*#)?$|^-\s*#\s*-$", re.I)


def _edge_key(line: str) -> str:
    return re.sub(r"\d+", "#", " ".join(line.split())).lower()


def _without_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """Each page's lines without its running header and footer: a line on the edge of most pages (at least two),
    and a bare page number. (A running header repeats the document's title or a label such as "CONFIDENTIAL":
    kept even once, it was quoted as an answer's lead.)"""

    def edges(lines: list[str]) -> set[int]:
        filled = [i for i, line in enumerate(lines) if line.strip()]
        return set(filled[:_PAGE_EDGE] + filled[-_PAGE_EDGE:])

    keyed = [{i: _edge_key(lines[i]) for i in edges(lines)} for lines in pages]
    seen = Counter(key for keys in keyed for key in set(keys.values()))
    texts = sum(1 for lines in pages if any(line.strip() for line in lines))
    running = {key for key, count in seen.items() if count >= 2 and count * 3 >= texts * 2}
    cleaned = []
    for lines, keys in zip(pages, keyed, strict=True):
        furniture = {i for i, key in keys.items() if key in running or _PAGE_NUMBER.match(key)}
        cleaned.append([line for i, line in enumerate(lines) if i not in furniture])
    return cleaned


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
        if (
            previous
            and not is_table_row(previous)
            and not is_table_row(line)
            and not re.search(r"[.!?:;。！？：]$", previous)
            and not _PDF_BLOCK_START.match(line)
            and (len(previous) > 40 or continues)
        ):
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line)
    return "\n".join(out)


# --- docx -------------------------------------------------------------------------------------


def _check_zip_is_safe(raw: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> None:
    """Refuse a zip bomb from the central directory alone: nothing is inflated here."""
    import io

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise UnreadableDocument("not a valid DOCX (the file is not a zip archive)") from exc
    except (OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise UnreadableDocument(f"not a valid DOCX (the zip archive is damaged: {type(exc).__name__})") from exc
    uncompressed = sum(info.file_size for info in infos)
    compressed = max(1, sum(info.compress_size for info in infos))
    if uncompressed > limits.max_inflated_bytes:
        raise UnreadableDocument(limits.inflated_refusal("the DOCX", uncompressed))
    worst = max(infos, key=lambda i: i.file_size / max(1, i.compress_size), default=None)
    member_ratio = worst.file_size / max(1, worst.compress_size) if worst is not None else 0
    if uncompressed / compressed > limits.max_compression_ratio or (
        worst is not None and worst.file_size > _MB and member_ratio > limits.max_compression_ratio
    ):
        ratio = max(uncompressed / compressed, member_ratio)
        raise UnreadableDocument(
            f"refused: the DOCX would inflate {ratio:,.0f} times its size to {uncompressed / 1e6:,.0f} MB, over the "
            f"limit of {limits.max_compression_ratio:g} times (zip bomb?)"
        )


_XML_DECLARATIONS = re.compile(rb"<!(?:DOCTYPE|ENTITY)", re.I)


def _check_docx_parts(raw: bytes, limits: ParseLimits) -> None:
    """Inflate the XML parts once, in bounded blocks, before python-docx parses them: no part may declare
    entities (Word never writes a DOCTYPE; entity expansion is how XML bombs work), every part must match
    its checksum (a part inflating past its declared size fails it), and all of it stays under the limit."""
    import io

    budget = limits.max_inflated_bytes
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        for info in archive.infolist():
            if not info.filename.lower().endswith((".xml", ".rels")):
                continue
            head = b""
            try:
                with archive.open(info) as member:
                    while block := member.read(64 * 1024):
                        budget -= len(block)
                        if budget < 0:
                            raise UnreadableDocument(limits.inflated_refusal("the DOCX"))
                        if len(head) < 64 * 1024:
                            head += block
                            if _XML_DECLARATIONS.search(head.replace(b"\x00", b"")):
                                raise UnreadableDocument(
                                    f"refused: the DOCX part {info.filename} declares XML entities (a DOCTYPE), "
                                    "which Word never writes (XML entity bomb?)"
                                )
            except UnreadableDocument:
                raise
            except zipfile.BadZipFile as exc:  # "Bad CRC-32": the part is not what the archive says it is
                raise UnreadableDocument(
                    f"the DOCX is damaged: {info.filename} does not match its checksum (its declared size may be "
                    "false, as in a zip bomb)"
                ) from exc
            except (OSError, EOFError, ValueError, NotImplementedError) as exc:
                raise UnreadableDocument(
                    f"the DOCX is damaged: {info.filename} cannot be inflated ({type(exc).__name__})"
                ) from exc


def _parse_docx(raw: bytes, path: Path, limits: ParseLimits) -> ParsedDocument:
    import io

    import docx
    from docx.opc.exceptions import PackageNotFoundError

    _check_zip_is_safe(raw, limits)
    _check_docx_parts(raw, limits)
    try:
        document = docx.Document(io.BytesIO(raw))
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise UnreadableDocument(f"corrupt DOCX ({type(exc).__name__})") from exc
    except Exception as exc:  # lxml raises its own XML errors on damaged parts
        if "depth" in str(exc).lower():  # libxml2 refuses elements nested past 256 levels
            raise UnreadableDocument(limits.depth_refusal("DOCX")) from exc
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


_PARSERS: dict[str, Callable[[bytes, Path, ParseLimits], ParsedDocument]] = {
    ".md": _parse_markdown,
    ".markdown": _parse_markdown,
    ".txt": _parse_text,
    ".html": _parse_html,
    ".htm": _parse_html,
    ".pdf": _parse_pdf,
    ".docx": _parse_docx,
}
