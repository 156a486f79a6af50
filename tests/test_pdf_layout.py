"""Reading tables out of pypdf's layout-mode text (tools/pdf_layout): what is a table and what stays text.

The PDF tests in test_parsing.py go through real PDFs; these pin the rules on layout text as pypdf writes it."""

from __future__ import annotations

from tools.pdf_layout import page_lines


def layout(*lines: str) -> str:
    return "\n".join(lines)


def test_a_first_row_of_labels_makes_a_table() -> None:
    text = layout(
        "Plan                          Requests per minute",
        "Starter                       60",
        "Enterprise                    3,000",
    )
    assert page_lines(text) == ["Plan | Requests per minute", "Starter | 60", "Enterprise | 3,000"]


def test_a_wrapped_first_cell_joins_its_row_and_the_title_under_the_table_does_not() -> None:
    text = layout(
        "Function                        FY2027 budget          Share of revenue",
        "Customer success (operating     $4.2M                  5%",
        "portion)",
        "General and administrative      $11.0M                 13%",
        "Capex",
    )
    assert page_lines(text) == [
        "Function | FY2027 budget | Share of revenue",
        "Customer success (operating portion) | $4.2M | 5%",
        "General and administrative | $11.0M | 13%",
        "Capex",
    ]


def test_a_paragraph_right_under_a_table_ends_it() -> None:
    paragraph = "The plan assumes a synchronous replica in the same region at all times, as the topology says."
    text = layout(
        "Scenario                  RPO                  RTO",
        "In-region failover        0                    15 minutes",
        paragraph,
    )
    assert page_lines(text) == ["Scenario | RPO | RTO", "In-region failover | 0 | 15 minutes", paragraph]


def test_columns_without_a_header_stay_lines_of_text() -> None:
    """An option list (no row of column names): read as its lines, as plain extraction reads them."""
    text = layout(
        "  -c,  --check                      checks  the  syntax  only",
        "  -o,  --output=FILE          output  file",
    )
    assert page_lines(text) == ["-c, --check checks the syntax only", "-o, --output=FILE output file"]


def test_code_and_index_letters_are_not_column_names() -> None:
    code = layout(
        '  result=asn1    write  value(cert, "tbsCertificate.subject", "NEW",',
        "                 NULL, 0);",
    )
    index = layout(
        "A                                         M",
        "asn1Coding program . . . . . . 5          Main type . . . . . . 4",
    )
    assert not any(" | " in line for line in page_lines(code) + page_lines(index))
