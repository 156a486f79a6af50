"""`kbbot ask` and `kbbot chat` as people run them.

The three `kbbot ask` processes (--json + --history, --questions, a malformed history file) start
together once per module, each on its own copy of the synced sample store, so the suite pays for
loading the engine in a fresh process about once. Cheaper checks (plain-text output, bad input files,
the chat console) run `bot.cli.main` in-process through conftest's `run_cli`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.cli import spawn_kbbot

PARENTAL_HISTORY = [
    {"role": "user", "text": "How much paid parental leave do employees get?"},
    {
        "role": "assistant",
        "text": "Primary caregivers get 16 weeks of fully paid leave; secondary caregivers get 6 weeks.",
    },
]

QUESTIONS = [
    {"question": "How many vacation days do full-time staff get per year?"},
    {"question": "去北京出差，酒店每晚最多可以报销多少钱？"},
    {"question": "Who won the 1998 FIFA World Cup?"},
    {"question": "and for contractors?", "history": PARENTAL_HISTORY},
    {"question": "   "},
    {"question": "How long is an OAuth access token valid for the API?", "kb": "product"},
    {"question": "How long is probation?", "kb": "nosuchkb"},
]

CONTRACT = {"status", "answer", "standalone_query", "route", "rounds", "citations", "timings_ms"}
CITATION = {"n", "kb", "document", "chunk_id", "excerpt", "score", "location"}


class Run:
    def __init__(self, settings, process):
        self.settings = settings
        self.process = process
        self.code: int | None = None
        self.out = self.err = ""

    def wait(self, timeout: float) -> Run:
        self.out, self.err = self.process.communicate(timeout=timeout)
        self.code = self.process.returncode
        return self


@pytest.fixture(scope="module")
def cli_runs(synced_data_dir: Path, tmp_path_factory: pytest.TempPathFactory, settings_for) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("cli")
    history = root / "history.json"
    history.write_text(json.dumps(PARENTAL_HISTORY), encoding="utf-8")
    questions = root / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q, ensure_ascii=False) for q in QUESTIONS) + "\n", encoding="utf-8")
    bad_history = root / "bad-history.json"
    bad_history.write_text('[{"role": "user", "text": "hi"}', encoding="utf-8")  # unterminated

    def private_settings(name: str):
        data_dir = root / name / "data"
        shutil.copytree(synced_data_dir, data_dir)
        return settings_for(data_dir)

    commands = {
        "history": ("ask", "--json", "--history", str(history), "and for contractors?"),
        "questions": ("ask", "--questions", str(questions), "--json"),
        "bad_history": ("ask", "--history", str(bad_history), "How long is probation?"),
    }
    runs = {}
    for name, args in commands.items():
        settings = private_settings(name)
        runs[name] = Run(settings, spawn_kbbot(settings, *args))
    try:
        for run in runs.values():
            run.wait(timeout=600)
    finally:
        for run in runs.values():
            if run.process.poll() is None:
                run.process.kill()
                run.process.wait()
    return runs


def live_chunk(settings, kb: str, chunk_id: str) -> bool:
    from tools.service import KnowledgeService

    with KnowledgeService(settings.tools) as service:
        return len(service.store.get_chunks(kb, [chunk_id])) == 1


# --- through real processes ---------------------------------------------------------------------


def test_ask_json_with_history_resolves_the_follow_up(cli_runs):
    run = cli_runs["history"]
    assert run.code == 0, run.err
    answer = json.loads(run.out)

    assert set(answer) >= CONTRACT
    assert answer["status"] == "answered"
    assert "parental leave" in answer["standalone_query"].lower()
    assert answer["route"]["kbs"] == ["people"] and set(answer["route"]["scores"]) >= {"people"}
    assert 1 <= len(answer["rounds"]) <= 3
    assert {"query", "kbs", "sufficient"} <= set(answer["rounds"][0])
    assert answer["citations"] and all(set(c) >= CITATION for c in answer["citations"])
    assert "parental-leave.html" in [c["document"] for c in answer["citations"]]
    for c in answer["citations"]:
        assert live_chunk(run.settings, c["kb"], c["chunk_id"])
    assert "total" in answer["timings_ms"]


def test_ask_questions_prints_one_answer_per_line_in_order(cli_runs):
    run = cli_runs["questions"]
    lines = [json.loads(line) for line in run.out.splitlines() if line.strip()]

    assert len(lines) == len(QUESTIONS), run.err
    for row, line in zip(QUESTIONS, lines, strict=True):
        assert line["question"] == row["question"].strip() or line.get("error")
    vacation, beijing, fifa, contractors, empty, token, unknown = lines

    assert vacation["status"] == "answered" and "annual-and-sick-leave.md" in [
        c["document"] for c in vacation["citations"]
    ]
    assert beijing["status"] == "answered" and "¥600" in beijing["answer"]
    assert fifa["status"] == "insufficient_context" and fifa["citations"] == []
    assert contractors["status"] == "answered" and "parental leave" in contractors["standalone_query"].lower()
    assert set(empty) == {"question", "error"} and "empty" in empty["error"]
    assert token["route"]["kbs"] == ["product"] and token["route"]["method"] == "pinned"
    assert set(unknown) == {"question", "error"} and "nosuchkb" in unknown["error"]
    for line in (vacation, beijing, fifa, contractors, token):
        assert set(line) >= CONTRACT and len(line["rounds"]) <= 3
        for c in line["citations"]:
            assert live_chunk(run.settings, c["kb"], c["chunk_id"])
    assert run.code == 1, "a failed line makes the run fail, after every line was answered"
    assert "Traceback" not in run.err


def test_malformed_history_file_is_a_clear_error(cli_runs):
    run = cli_runs["bad_history"]
    assert run.code not in (0, None)
    assert run.err.startswith("error: ") and "bad-history.json" in run.err
    assert "Traceback" not in run.err and run.out == ""


# --- in-process ---------------------------------------------------------------------------------


def test_ask_prints_a_readable_answer_with_sources(run_cli, sample_settings):
    result = run_cli(sample_settings, "ask", "How long is probation for new hires?")
    assert result.code == 0, result.err
    assert "3 months" in result.out
    assert "Sources:" in result.out and "[1] people/onboarding-guide.md" in result.out
    assert "round(s)" in result.out and "offline" in result.out


def test_ask_refusal_is_readable_too(run_cli, sample_settings):
    result = run_cli(sample_settings, "ask", "Who won the 1998 FIFA World Cup?")
    assert result.code == 0
    assert "couldn't find enough" in result.out and "Sources:" not in result.out


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"role": "user", "text": "hi"}', "list"),
        ('[{"role": "bot", "text": "hi"}]', "role"),
        ('["just a string"]', "history turn"),
        ("[1, 2]", "history turn"),
        (b"\xff\xfe not utf-8", "history.json"),
        ("", "history.json"),
    ],
)
def test_bad_history_files_are_clear_errors(run_cli, sample_settings, tmp_path, content, fragment):
    path = tmp_path / "history.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = run_cli(sample_settings, "ask", "--history", str(path), "and for contractors?")
    assert result.code != 0
    assert result.err.startswith("error: ") and fragment in result.err and str(path) in result.err


def test_missing_history_file_is_a_clear_error(run_cli, sample_settings, tmp_path):
    result = run_cli(sample_settings, "ask", "--history", str(tmp_path / "nope.json"), "hello?")
    assert result.code != 0 and "nope.json" in result.err


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('{"q": "no question key"}', '"question"'),
        ('{"question": 42}', '"question"'),
        ('{"question": "ok?", "history": "not a list"}', '"history"'),
        ('{"question": "ok?", "history": ["not a turn"]}', "history turn"),
        ('{"question": "ok?", "history": [{"role": "system", "text": "x"}]}', "role"),
        ('{"question": "ok?", "kb": 7}', '"kb"'),
        ("not json at all", "questions.jsonl:2"),
    ],
)
def test_bad_questions_files_are_clear_errors_before_anything_is_answered(
    run_cli, sample_settings, tmp_path, line, fragment
):
    path = tmp_path / "questions.jsonl"
    path.write_text('{"question": "How long is probation?"}\n' + line + "\n", encoding="utf-8")
    result = run_cli(sample_settings, "ask", "--questions", str(path), "--json")
    assert result.code != 0
    assert result.err.startswith("error: ") and fragment in result.err
    assert result.out == "", "nothing is answered when the file is malformed"


def test_ask_without_a_question_is_a_usage_error(run_cli, sample_settings):
    result = run_cli(sample_settings, "ask")
    assert result.code != 0 and "QUESTION" in result.err


def test_ask_with_an_empty_question_fails_clearly(run_cli, sample_settings):
    result = run_cli(sample_settings, "ask", "   ")
    assert result.code == 2 and "empty" in result.err


def test_chat_keeps_history_pins_kbs_and_shows_the_trace(run_cli, sample_settings, monkeypatch):
    lines = iter(
        [
            "How much paid parental leave do employees get?",
            "and for contractors?",
            "/trace",
            "/kb nosuchkb",
            "/kb product",
            "How long is an OAuth access token valid for the API?",
            "/trace",
            "/kb",
            "/new",
            "/trace",
            "/quit",
        ]
    )
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    result = run_cli(sample_settings, "chat")

    assert result.code == 0, result.err
    out = result.out
    assert "offline mode" in out
    traces = out.split("standalone query: ")
    assert len(traces) == 3, "two traces, then 'no answer yet' after /new"
    assert "parental leave" in traces[1].split("\n", 1)[0].lower(), "the follow-up was condensed from history"
    assert "round 1 [offline]" in traces[1]
    assert "no knowledge base 'nosuchkb'" in out
    assert "(pinned to product)" in out and "['product']" in traces[2].split("\n")[1]
    assert "(searching every knowledge base)" in out and "(conversation cleared)" in out
    assert out.rstrip().endswith("no answer yet") or "no answer yet" in out
