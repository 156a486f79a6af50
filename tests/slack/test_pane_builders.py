"""The assistant pane's pure parts: greeting, suggested prompts, and the record of pane threads."""

from __future__ import annotations

from bot.slack.assistant_threads import PaneThreads
from bot.slack.pane import MAX_PROMPTS, PaneKb, greeting, plain, suggested_prompts, topic_of

KBS = [
    PaneKb("people", ("annual-and-sick-leave.md", "parental-leave.html")),
    PaneKb("finance", ("revenue-targets-fy2027.md",)),
    PaneKb("product", ("api-reference.pdf", "pricing-plans.html", "faq.html")),
    PaneKb("engineering", ()),
]


def test_prompts_take_a_document_of_each_kb_in_turn_the_viewed_channels_first():
    prompts = suggested_prompts(KBS, first=["product"])
    assert len(prompts) == MAX_PROMPTS
    assert prompts[0] == {
        "title": "Api reference",
        "message": "What do the product documents say about api reference?",
    }
    kbs = [p["message"].split()[3] for p in prompts]
    assert kbs == ["product", "finance", "people", "product"]  # then by name; engineering has no ready document


def test_prompts_come_only_from_the_kbs_given_and_at_most_four():
    assert suggested_prompts([], first=[]) == []
    assert suggested_prompts([PaneKb("people", ())], first=["people"]) == []
    only_people = suggested_prompts([KBS[0]], first=[])
    assert [p["title"] for p in only_people] == ["Annual and sick leave", "Parental leave"]
    many = suggested_prompts([PaneKb("big", tuple(f"doc-{i}.md" for i in range(20)))], first=[])
    assert len(many) == MAX_PROMPTS


def test_document_names_cannot_become_markup_in_a_prompt():
    hostile = PaneKb("people", ("<!channel> <@U0ADMIN001> [x](https://evil.example) &amp;.md",))
    [prompt] = suggested_prompts([hostile], first=[])
    text = prompt["title"] + prompt["message"]
    assert not any(ch in text for ch in "<>@[]&!")
    assert plain("報銷 政策_v2") == "報銷 政策 v2"
    assert topic_of("shanghai-expense-policy-zh.md") == "shanghai expense policy zh"
    assert len(suggested_prompts([PaneKb("k", ("x" * 500 + ".md",))], [])[0]["title"]) <= 60


def test_the_greeting_names_the_readable_kbs_and_what_is_searched_first():
    text = greeting(["finance", "people"], ["finance"], "C0FINANCE1")
    assert text.startswith("Hi!") and "*finance*, *people*" in text and "<#C0FINANCE1>" in text
    assert "search *finance* first" in text
    assert "first" not in greeting(["people"], [], "C0FINANCE1")  # nothing of that channel's to search first
    assert "<#" not in greeting(["people"], ["people"], "<!channel>")  # only a real channel id is rendered
    assert "no knowledge bases you can read" in greeting([], [], None)
    assert "&lt;b&gt;" in greeting(["<b>"], [], None)


def test_pane_threads_survive_a_restart_and_tell_pane_threads_from_dm_threads(tmp_path):
    path = tmp_path / "assistant_threads.sqlite3"
    threads = PaneThreads(path)
    threads.save(channel_id="D1", thread_ts="1.1", context={"channel_id": "C0FINANCE1", "team_id": "T1"})
    threads.save(channel_id="D1", thread_ts="1.2", context={})  # the user was looking at no channel
    threads.close()
    reopened = PaneThreads(path)
    assert reopened.is_pane_thread("D1", "1.1") and reopened.is_pane_thread("D1", "1.2")
    assert not reopened.is_pane_thread("D1", "9.9") and not reopened.is_pane_thread("D1", None)
    assert reopened.find(channel_id="D1", thread_ts="1.1").channel_id == "C0FINANCE1"
    assert reopened.find(channel_id="D1", thread_ts="1.2") is None
    reopened.save(channel_id="D1", thread_ts="1.1", context={"channel_id": "C0PRODUCT1"})  # context changed
    assert reopened.context_of("D1", "1.1") == {"channel_id": "C0PRODUCT1"}
    reopened.close()


def test_a_held_pane_question_resumes_as_a_pane_question():
    from bot.core import Surface
    from bot.slack.conversation import ASSISTANT, Question

    question = Question(
        "D0EMPLOY01", "U0EMPLOY01", "how many vacation days?", "2.2", "1.1", True, "T1", ASSISTANT,
        context_channel="C0PEOPLE01", has_files=True,
    )  # fmt: skip
    resumed = Question.from_payload(question.to_payload())
    origin = resumed.origin
    assert origin.surface == Surface.ASSISTANT and origin.context_channel == "C0PEOPLE01"
    assert origin.thread_ts == "1.1" and origin.private and resumed.has_files
