"""The App Home view and the 👎 reason modal as pure functions: no Slack, no server."""

from __future__ import annotations

import json

from bot.core import DocView, Gap, GapsReport, HomeView, KbView
from bot.slack import home
from bot.slack.feedback_reason import REASON_ACTION, REASON_BLOCK, read_reason, reason_modal

NOW = 1_800_000_000.0
DAY = 86400.0


def kb(name: str, may_upload: bool = False, docs: tuple[DocView, ...] = (), **extra) -> KbView:
    return KbView(
        name=name,
        description=extra.pop("description", f"All about {name}."),
        restricted=extra.pop("restricted", False),
        may_upload=may_upload,
        documents=docs,
        channels=extra.pop("channels", ("C0PEOPLE01",)),
        note=extra.pop("note", None),
    )


def gap(question: str, refused: int = 1, disliked: int = 0, **extra) -> Gap:
    return Gap(
        question=question,
        kbs=extra.pop("kbs", ("people",)),
        count=refused + disliked,
        refused=refused,
        disliked=disliked,
        last_at=extra.pop("last_at", NOW - 2 * DAY),
        reasons=extra.pop("reasons", {}),
        comments=extra.pop("comments", ()),
    )


def report(*gaps: Gap, total: int | None = None) -> GapsReport:
    return GapsReport(30, NOW - 30 * DAY, ("people",), gaps, len(gaps) if total is None else total)


def texts(view: dict) -> str:
    return json.dumps(view, ensure_ascii=False)


def rendered_texts(node) -> list[str]:
    """Every text Slack would display (not the values buttons send back)."""
    if isinstance(node, dict):
        return [
            t
            for k, v in node.items()
            if k != "value"
            for t in ([v] if k == "text" and isinstance(v, str) else rendered_texts(v))
        ]
    if isinstance(node, list):
        return [t for item in node for t in rendered_texts(item)]
    return []


def buttons(view: dict) -> list[dict]:
    return [b["accessory"] for b in view["blocks"] if b.get("accessory", {}).get("type") == "button"]


def within_limits(view: dict) -> None:
    assert view["type"] == "home"
    assert 0 < len(view["blocks"]) <= home.MAX_HOME_BLOCKS
    for block in view["blocks"]:
        if block["type"] == "section":
            assert 0 < len(block["text"]["text"]) <= 3000
        if block["type"] == "context":
            assert all(0 < len(e["text"]) <= 3000 for e in block["elements"])
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150


def test_a_reader_sees_the_kbs_how_to_ask_and_the_channels_but_no_upload_or_gaps():
    ready = DocView("leave.md", "ready", 4, None, None, NOW - 3 * DAY)
    failed = DocView("broken.pdf", "failed", 0, "the PDF is encrypted", None, NOW - DAY)
    view = home.home_view(HomeView((kb("people", docs=(ready, failed)),), None), now=NOW)
    within_limits(view)
    text = texts(view)
    assert "*people* · 2 documents · last updated " in text and "All about people." in text
    assert "Answers first in <#C0PEOPLE01>" in text
    assert "How to ask" in text and "/kb ask" in text
    assert not buttons(view) and "Knowledge gaps" not in text
    assert "broken.pdf" not in text and "encrypted" not in text  # failures are for the uploaders


def test_an_uploader_sees_upload_failed_documents_and_gaps():
    failed = DocView("broken.pdf", "failed", 0, "the PDF is encrypted", None, NOW - DAY)
    gaps = report(
        gap("How many vacation days do contractors get?", refused=3, disliked=2, reasons={"outdated": 2}),
        gap("Is there a gym?", last_at=NOW - 60),
    )
    view = home.home_view(HomeView((kb("people", True, (failed,)), kb("product")), gaps), now=NOW)
    within_limits(view)
    [upload] = buttons(view)
    assert upload["action_id"] == home.UPLOAD_ACTION_ID and upload["value"] == "people"
    text = texts(view)
    assert "broken.pdf" in text and "the PDF is encrypted" in text
    assert "Knowledge gaps — last 30 days" in text
    first = [b for b in view["blocks"] if "vacation days" in json.dumps(b)][0]["text"]["text"]
    assert "refused 3×" in first and ":thumbsdown: 2× (outdated 2)" in first and "last asked 2 days ago" in first
    assert "last asked today" in text


def test_no_gaps_says_so():
    view = home.home_view(HomeView((kb("people", True),), report()), now=NOW)
    assert "No refused questions or 👎 answers in the last 30 days" in texts(view)


def test_the_view_stays_within_slacks_limits_with_many_kbs_and_gaps():
    long = "x" * 5000
    docs = tuple(DocView(f"d{i}.md", "failed", 0, long, None, None) for i in range(40))
    kbs = tuple(
        kb(f"kb{i:03d}", True, docs, description=long, channels=tuple(f"C{i:09d}" for i in range(30)))
        for i in range(150)
    )
    gaps = report(*(gap(long + str(i), comments=(long,) * 3) for i in range(200)), total=450)
    view = home.home_view(HomeView(kbs, gaps, note=long), now=NOW)
    within_limits(view)
    text = texts(view)
    assert "more knowledge bases" in text and "and 425 more (`kbbot report`" in text
    assert sum(1 for b in view["blocks"] if "kb000" in json.dumps(b)) >= 1  # KBs still shown first


def test_content_is_inert():
    hostile = "<!channel> <@U123> <https://evil.example|click>"
    view = home.home_view(
        HomeView(
            (
                kb(
                    hostile,
                    True,
                    (DocView(hostile, "failed", 0, hostile, None, None),),
                    description=hostile,
                    channels=(hostile,),
                ),
            ),
            report(gap(hostile, disliked=1, comments=(hostile,))),
        ),
        now=NOW,
    )
    text = "\n".join(rendered_texts(view))
    assert "<!channel>" not in text and "<@U123>" not in text and "<https://evil" not in text
    assert "&lt;!channel&gt;" in text
    assert buttons(view)[0]["value"] == hostile  # the KB name goes back to kbbot, which checks it again


def test_unavailable_view_has_no_exception_text():
    view = home.unavailable_view()
    within_limits(view)
    assert "couldn't load" in texts(view)


def test_reason_modal_round_trip():
    view = reason_modal("a1b2", "C0PEOPLE01", "2.000002", "1.000001")
    assert view["type"] == "modal" and view["close"]["text"] == "Skip"
    options = view["blocks"][0]["element"]["options"]
    assert [o["value"] for o in options] == ["wrong", "outdated", "incomplete", "not_what_i_asked"]
    assert all(b.get("optional") for b in view["blocks"] if b["type"] == "input")
    submitted = {
        **view,
        "state": {
            "values": {
                REASON_BLOCK: {REASON_ACTION: {"selected_option": {"value": "outdated"}}},
                "comment": {"reason_comment": {"value": "  changed in March "}},
            }
        },
    }
    metadata, reason, comment = read_reason(submitted)
    assert metadata["answer_id"] == "a1b2" and reason == "outdated" and comment == "changed in March"
    forged = {
        "private_metadata": "not json",
        "state": {"values": {REASON_BLOCK: {REASON_ACTION: {"selected_option": {"value": "rm -rf"}}}}},
    }
    assert read_reason(forged) == ({}, None, None)
