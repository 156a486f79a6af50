"""A PDF page's lines from pypdf's layout-mode text: tables as "cell | cell" rows, everything else as plain lines.

pypdf's plain extraction writes a table's cells one after another ("Over $7,500 Manager, department head and the VP
Finance"), so a row read as part of the sentence around it and its cells lost their column names. Layout mode
places text where it sits on the page, so a table's columns stay apart, separated by runs of spaces that every row
shares. Those rows become "Claim amount | Who must approve" lines, the form the text pipeline reads as a table
(each row with its header), as it does a DOCX or HTML table.

What is not a clear table stays text: a block whose first row is not a header of short labels. A page set in two
columns is left to plain extraction, which keeps its reading order (side by side, its lines interleave two texts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Layout mode separates words by one or two spaces (two where a font's spacing is wide) and a table's columns by
# more.
COLUMN_GAP = 3
_SEGMENT = re.compile(rf"\S+(?: {{1,{COLUMN_GAP - 1}}}\S+)*")
_BLANK_RUN = re.compile(rf" {{{COLUMN_GAP},}}")
_OPEN_END = re.compile(r"[^.!?;:。！？；：]$")
# A column's name: a few words of letters and figures ("RTO (time to recover)", "FY2027 plan"), not code or a sentence.
_LABEL = re.compile(r"^[^\W\d_][\w()/&%#'’+-]*(?: [\w()/&%#'’+-]+){0,3}$")
MAX_LABEL_CHARS = 24
# A page is set in two columns when some of its lines are two long runs of text side by side, starting at the same
# place: single-column prose never leaves a gap that wide inside a line, and a table's cells are rarely that long.
TWO_COLUMN_MIN_LINES = 3
TWO_COLUMN_RUN_CHARS = 25


@dataclass(frozen=True)
class _Segment:
    start: int
    end: int
    text: str


def _segments(line: str) -> list[_Segment]:
    return [_Segment(m.start(), m.end(), m.group()) for m in _SEGMENT.finditer(line)]


def _is_two_column(lines: list[str]) -> bool:
    """Whether a page is two columns of prose side by side (a paper, a newsletter)."""
    starts = [
        segments[1].start
        for segments in map(_segments, lines)
        if len(segments) == 2 and min(len(s.text) for s in segments) >= TWO_COLUMN_RUN_CHARS
    ]
    if len(starts) < TWO_COLUMN_MIN_LINES:
        return False
    middle = sorted(starts)[len(starts) // 2]
    return sum(abs(start - middle) <= COLUMN_GAP for start in starts) >= TWO_COLUMN_MIN_LINES


def _is_header(segments: list[_Segment]) -> bool:
    """A table's first row names its columns: labels of a few words that start with a letter (a lone letter is an
    index's section, not a column)."""
    return len(segments) >= 2 and all(
        2 <= len(s.text) <= MAX_LABEL_CHARS and _LABEL.match(" ".join(s.text.split())) for s in segments
    )


def _gaps(line: str) -> list[tuple[int, int]]:
    """The runs of three or more spaces between a line's segments."""
    segments = _segments(line)
    return [(a.end, b.start) for a, b in zip(segments, segments[1:], strict=False)]


def _narrowed(gaps: list[tuple[int, int]], line: str) -> list[tuple[int, int]] | None:
    """The column gaps still blank in `line` as well (None when its text crosses one): a line of the same table
    leaves every gap as wide as a gap between columns."""
    narrowed = []
    for gap_start, gap_end in gaps:
        blank = _BLANK_RUN.finditer(line.ljust(gap_end), gap_start, gap_end)
        widest = max(((m.start(), m.end()) for m in blank), key=lambda run: run[1] - run[0], default=None)
        if widest is None:
            return None
        narrowed.append(widest)
    return narrowed


def _cells(line: str, gaps: list[tuple[int, int]]) -> list[str]:
    bounds = [0, *(start for start, _ in gaps), len(line) + 1]
    starts = [0, *(end for _, end in gaps)]
    return [" ".join(line[a : max(a, b)].split()) for a, b in zip(starts, bounds[1:], strict=True)]


def _starts_row(cells: list[str], previous: list[str]) -> bool:
    """A line with its own first cell starts a row; a first cell that continues the one above (it starts in lower
    case, or the one above left a bracket open) and a line with text only in later columns do not."""
    first = cells[0]
    if not first or first[0].islower():
        return False
    return previous[0].count("(") <= previous[0].count(")")


def _leads_into(cells: list[str], row: list[str]) -> bool:
    """Whether a continuation line above `row` is the top of `row`'s cells (a vertically centred cell starts above its
    row's first line) rather than the bottom of the row before: it ends open and the row's cell goes on in lower
    case."""
    filled = [i for i, cell in enumerate(cells) if cell]
    return bool(filled) and all(_OPEN_END.search(cells[i]) and row[i][:1].islower() for i in filled)


def _rows(lines: list[str], gaps: list[tuple[int, int]]) -> list[list[str]]:
    """The rows of a table block, each a list of cells, the block's wrapped cell lines joined to their rows."""
    rows: list[list[str]] = []
    pending: list[list[str]] = []  # continuation lines not yet given to a row

    def settle(next_row: list[str] | None) -> None:
        above: list[list[str]] = []
        while pending and next_row is not None and rows and _leads_into(pending[-1], _joined([*above, next_row])):
            above.insert(0, pending.pop())
        for cells in pending:
            rows[-1] = _joined([rows[-1], cells])
        pending.clear()
        if next_row is not None:
            rows.append(_joined([*above, next_row]))

    for line in lines:
        cells = _cells(line, gaps)
        if not rows or _starts_row(cells, _joined([rows[-1], *pending])):
            settle(cells)
        else:
            pending.append(cells)
    settle(None)
    return rows


def _joined(parts: list[list[str]]) -> list[str]:
    return [" ".join(cell for cell in column if cell) for column in zip(*parts, strict=True)]


def _table_end(lines: list[str], start: int) -> tuple[int, list[tuple[int, int]]]:
    """Where the table whose header is lines[start] ends (exclusive), and its column gaps."""
    gaps = _gaps(lines[start])
    end = start + 1
    while end < len(lines) and lines[end].strip():
        narrowed = _narrowed(gaps, lines[end])
        if narrowed is None:
            break
        cells = _cells(lines[end], narrowed)
        if not any(cells[1:]) and _starts_row(cells, _cells(lines[end - 1], narrowed)):
            break  # a title under the table ("Headcount"), not the rest of a first cell
        gaps, end = narrowed, end + 1
    return end, gaps


def page_lines(layout_text: str) -> list[str] | None:
    """The lines of a page's layout-mode text, spaces collapsed, each table's rows as "cell | cell" lines; None for
    a page set in two columns (its lines side by side interleave two texts). Blank lines are dropped: plain
    extraction has none, and the chunker would read them as paragraph breaks it never saw before."""
    lines = layout_text.splitlines()
    if _is_two_column(lines):
        return None
    out: list[str] = []
    i = 0
    while i < len(lines):
        if _is_header(_segments(lines[i])):
            end, gaps = _table_end(lines, i)
            rows = _rows(lines[i:end], gaps)
            if len(rows) >= 2:
                out.extend(" | ".join(row) for row in rows)
                i = end
                continue
        line = " ".join(lines[i].split())
        if line:
            out.append(line)
        i += 1
    return out
