"""kbbot's Block Kit builders as pure functions: no Slack, no server."""

from __future__ import annotations

import json

from bot.slack import builders


def test_upload_modal_offers_only_the_given_kbs_and_the_supported_files():
    view = builders.upload_modal(["people", "product"], "product", 25, {"channel": "C1"})
    select = view["blocks"][0]["element"]
    assert [o["value"] for o in select["options"]] == ["people", "product"]
    assert select["initial_option"]["value"] == "product"
    files = view["blocks"][1]["element"]
    assert files["type"] == "file_input" and files["max_files"] == builders.MAX_FILES
    assert {"md", "pdf", "docx", "html", "txt"} <= set(files["filetypes"])
    assert json.loads(view["private_metadata"]) == {"channel": "C1"}
    assert "up to 10 MB each" in json.dumps(view)  # Slack's own limit for a file_input, below the 25 MB setting


def test_upload_modal_without_a_chosen_kb_has_no_initial_option():
    view = builders.upload_modal(["people"], None, 5, {})
    assert "initial_option" not in view["blocks"][0]["element"]
    assert "up to 5 MB each" in json.dumps(view)


def test_which_kb_asks_with_a_button_per_kb_in_rows_of_five():
    kbs = [f"kb{i:02d}" for i in range(25)]
    text, blocks = builders.which_kb(["a.md", "<!channel>.md"], ["F1", "F2"], kbs)
    assert text == "Which knowledge base should I add 2 file(s) to?"
    rows = [b for b in blocks if b["type"] == "actions"]
    buttons = [e for row in rows for e in row["elements"]]
    assert len(buttons) == builders.MAX_CHOICES and all(len(row["elements"]) <= 5 for row in rows)
    assert {json.loads(b["value"])["files"] == ["F1", "F2"] for b in buttons} == {True}
    assert buttons[0]["action_id"] == f"{builders.CHOICE_ACTION_PREFIX}kb00"
    assert "<!channel>" not in json.dumps(blocks) and "&lt;!channel&gt;" in blocks[0]["text"]["text"]


def test_only_real_user_ids_become_mentions():
    text = builders.uploaders_text(["U0ADMIN001", "W0ENTERPRISE", "U1>|<!channel", "bob"])
    assert text.startswith("<@U0ADMIN001>, <@W0ENTERPRISE>, ")
    assert "<!channel>" not in text and "<@U1>" not in text and "bob" in text
    assert "nobody yet" in builders.uploaders_text([])


def test_refusals_escape_the_kb_name_and_fit_a_modal_error():
    assert builders.not_allowed("a<b", ["U0ADMIN001"]).startswith(":no_entry: Only the uploaders of `a&lt;b`")
    plain = builders.not_allowed_plain("x" * 400)
    assert len(plain) <= 150 and "<" not in plain
    assert builders.no_such_kb("<!here>") == "There is no knowledge base `&lt;!here&gt;`. See `/kb list`."
