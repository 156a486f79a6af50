"""Questions answered in worker processes (KBBOT_ANSWER_PROCESSES, bot/core/answer_processes.py).

The Slack surface as in test_slack_surface.py, with the answers given by two real answering processes: the
same scenarios (imported from there, so they run here against this module's bot), then what only a second
process can get wrong — the store it must never open, rules and memberships it must not guess, an ingest in
the serving process it must see, a worker that dies.
"""

from __future__ import annotations

import glob
import os
import signal
import threading
import time

import pytest
from helpers.slack_helpers import dm_channel
from helpers.slackbot import running_bot
from test_slack_surface import (  # noqa: F401 - collected here, run against this module's `slack_bot`
    CFO,
    EMPLOYEE,
    FINANCE,
    PEOPLE,
    reply_text,
    test_dm_is_answered_and_feedback_is_recorded,
    test_kb_upload_modal_downloads_ingests_and_answers_from_the_file,
    test_mention_gets_a_threaded_cited_answer,
    test_restricted_kb_is_cited_only_where_allowed,
    wait_reply,
)

from bot.core import KnowledgeBaseError, Origin
from bot.core.answer_processes import RESTART_DELAY_S, AnswerProcesses, RemoteCollection, Stopping, WorkerGone
from bot.core.bot import DECLARATIONS_CHECK_S

FINANCE_QUESTION = "What is the Q3 FY2027 revenue target?"


@pytest.fixture(scope="module")
def slack_bot(slack_settings, fake_slack):
    """The Slack bot of conftest.py, its questions handed to two answering processes (warmed up first)."""
    with running_bot(slack_settings, fake_slack, warm=False) as bot:
        bot.deps.answerer = AnswerProcesses(bot.deps.bot, 2, threads=4).start()
        assert bot.deps.answerer.wait_ready(), "the answering processes did not start"
        yield bot


@pytest.fixture(autouse=True)
def _answered_by_the_workers(bot):
    """Every question of every test here is answered by an answering process, never by the serving one."""
    answerer = bot.deps.answerer
    before = answerer.in_process
    yield
    assert answerer.in_process == before, "a question was answered in the serving process"


def test_the_answer_is_the_one_the_serving_process_would_give(bot):
    question = "How many vacation days do full-time staff get per year?"
    origin = Origin.slack_channel(PEOPLE, EMPLOYEE)
    remote = bot.deps.answerer.ask(origin, question)
    local = bot.kbbot.ask(origin, question)
    assert remote.answer.answer == local.answer.answer and "25 days" in remote.answer.answer
    assert [c.chunk_id for c in remote.answer.citations] == [c.chunk_id for c in local.answer.citations]
    assert [c.updated_at for c in remote.answer.citations] == [c.updated_at for c in local.answer.citations]
    # recorded by the answering process, readable by the serving one
    assert bot.kbbot.answer_record(remote.answer_id)["question"] == question


def test_the_answering_processes_never_open_the_embedded_store(bot):
    chroma = str(bot.kbbot.settings.resolved_data_dir.resolve() / "chroma")

    def in_chroma(pid: int) -> list[str]:
        return [p for p in (os.path.realpath(fd) for fd in glob.glob(f"/proc/{pid}/fd/*")) if p.startswith(chroma)]

    assert in_chroma(os.getpid()), "the serving process holds the store open"
    workers = bot.deps.answerer.pids()
    assert len(workers) == 2 and not any(in_chroma(pid) for pid in workers), "a worker opened the Chroma store"
    collection = bot.kbbot.service.store.require_kb("people").collection
    # What an answering process may ask the serving one to do with Chroma: reads, nothing else.
    with pytest.raises(KnowledgeBaseError, match="not a read"):
        bot.deps.answerer._carry_out("chroma", (collection, "delete", {"ids": ["x"]}))
    with pytest.raises(KnowledgeBaseError, match="does not exist"):
        bot.deps.answerer._carry_out("chroma", ("kbbot_nosuch_g0", "get", {"ids": ["x"]}))
    with pytest.raises(KnowledgeBaseError, match="only reads"):
        RemoteCollection(None, collection, {}).upsert(ids=["x"])  # type: ignore[arg-type]


def test_a_failed_membership_lookup_fails_closed_in_the_worker(bot):
    bot.fake.errors["conversations.members"] = "internal_error"
    message, _ = bot.send.dm(CFO, FINANCE_QUESTION)
    [reply] = wait_reply(bot, dm_channel(CFO), message["ts"])
    assert "21.6" not in reply_text(reply)
    [record] = bot.kbbot.records.answers_in(dm_channel(CFO), message["ts"])
    assert "finance" not in record["kbs"]
    assert bot.fake.calls_of("conversations.members"), "the lookup was asked of Slack (and failed)"


def test_a_question_that_cannot_be_handed_over_fails_and_leaves_no_trace(bot):
    answerer = bot.deps.answerer
    with pytest.raises(KnowledgeBaseError, match="cannot be handed"):
        answerer.ask(Origin.slack_channel(PEOPLE, EMPLOYEE), "Why?", history=[threading.Lock()])  # type: ignore[list-item]
    assert all(w.in_flight == 0 and not w._questions for w in answerer._workers)


def _wait_until(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)
    return condition()


def test_a_killed_worker_loses_no_question_and_is_replaced(bot):
    """Killed while answering (waiting on the serving process's membership lookup): the question is asked again
    of the other worker and answered once, and the dead worker is replaced."""
    answerer = bot.deps.answerer
    restarts = answerer.restarts
    bot.fake.stalled.add("conversations.members")
    message, _ = bot.send.dm(CFO, FINANCE_QUESTION)
    bot.fake.wait_for(lambda: bot.fake.calls_of("conversations.members"), timeout=120, what="the membership lookup")
    [victim] = [w for w in answerer._workers if w.in_flight]
    bot.fake.stalled.discard("conversations.members")  # the victim's lookup hangs on; the next one goes through
    os.kill(victim.pid, signal.SIGKILL)
    try:
        [reply] = wait_reply(bot, dm_channel(CFO), message["ts"])
    finally:
        bot.fake.unstall()
    assert "21.6" in reply_text(reply), "answered by the other worker, with the CFO's finance channel"
    assert len(bot.kbbot.records.answers_in(dm_channel(CFO), message["ts"])) == 1
    assert victim.conn.closed, "the dead worker's pipe was left open"
    assert _wait_until(lambda: answerer.restarts == restarts + 1 and len(answerer.pids()) == 2)
    assert victim.pid not in answerer.pids() and answerer.wait_ready(60)
    message, _ = bot.send.mention(PEOPLE, EMPLOYEE, "How many paid sick days are there per year?")
    [reply] = wait_reply(bot, PEOPLE, message["ts"])
    assert "10 paid sick days" in reply_text(reply)


def test_a_worker_that_stops_answering_is_killed_and_replaced(bot):
    answerer = AnswerProcesses(bot.kbbot, 1, threads=2, warm=False, answer_timeout_s=3.0).start()
    try:
        assert answerer.wait_ready()
        [stuck] = answerer.pids()
        os.kill(stuck, signal.SIGSTOP)  # alive, answering nothing
        with pytest.raises(WorkerGone, match="in time"):
            answerer.ask(Origin.slack_channel(PEOPLE, EMPLOYEE), "How many paid sick days are there per year?")
        assert _wait_until(lambda: answerer.pids() and stuck not in answerer.pids()), "the stuck worker stayed"
        assert answerer.restarts == 1 and not os.path.exists(f"/proc/{stuck}")
    finally:
        answerer.close()


def test_workers_are_replaced_until_several_in_a_row_die_before_they_are_ready(bot):
    answerer = AnswerProcesses(bot.kbbot, 1, threads=1, warm=False).start()

    def kill_the_worker(when_ready: bool) -> None:
        assert _wait_until(lambda: len(answerer.pids()) == 1), "no worker was started"
        [pid] = answerer.pids()
        assert not when_ready or answerer.wait_ready()
        os.kill(pid, signal.SIGKILL)
        assert _wait_until(lambda: pid not in answerer.pids())

    try:
        for when_ready in (False, False, True, False, False):  # a worker that got ready starts the count again
            kill_the_worker(when_ready)
        kill_the_worker(False)  # the third in a row
        time.sleep(RESTART_DELAY_S + 2)
        assert answerer.pids() == [] and answerer.restarts == 5
    finally:
        answerer.close()


def test_a_kb_restricted_in_its_kb_toml_is_restricted_in_the_workers(synced_data_dir, tmp_path):
    """Only the serving process reads kb.toml files; it does so before handing a question over, so a KB made
    restricted is never searched by an answering process still holding the old rules."""
    import shutil

    from helpers.fake_slack import FakeSlack
    from helpers.slackbot import slack_settings_for

    from bot.config import REPO_ROOT

    data_dir, kbs = tmp_path / "data", tmp_path / "knowledge_bases"
    shutil.copytree(synced_data_dir, data_dir)
    shutil.copytree(REPO_ROOT / "knowledge_bases", kbs)
    fake = FakeSlack().start()
    settings = slack_settings_for(data_dir, fake.api_url, KBBOT_KNOWLEDGE_BASES_DIR=kbs)
    try:
        with running_bot(settings, fake, warm=False) as bot:
            bot.deps.answerer = answerer = AnswerProcesses(bot.deps.bot, 1, threads=2, warm=False).start()
            assert answerer.wait_ready()
            question, engineering = "How many vacation days do full-time staff get per year?", "C0ENG00001"

            def cited_people() -> bool:
                message, _ = bot.send.mention(engineering, EMPLOYEE, question)
                wait_reply(bot, engineering, message["ts"])
                [record] = bot.kbbot.records.answers_in(engineering, message["ts"])
                return "people" in {c["kb"] for c in record["citations"]}

            assert cited_people()
            path = kbs / "people" / "kb.toml"
            path.write_text(
                path.read_text(encoding="utf-8")
                .replace('visibility = "public"', 'visibility = "restricted"')
                .replace("allowed_channels = []", 'allowed_channels = ["C0PEOPLE01"]'),
                encoding="utf-8",
            )
            time.sleep(DECLARATIONS_CHECK_S + 0.2)  # how often the files are looked at
            assert not cited_people()
            assert answerer.in_process == 0
    finally:
        fake.stop()


def _children(pid: int) -> list[int]:
    from pathlib import Path

    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _running(pid: int) -> bool:
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _answering(pids: list[int]) -> list[int]:
    from pathlib import Path

    def cmdline(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            return ""

    return [p for p in pids if "spawn_main" in cmdline(p)]


def test_once_closed_no_question_is_answered_in_the_serving_process(bot):
    answerer = AnswerProcesses(bot.kbbot, 0, threads=1).start()
    answerer.close()
    with pytest.raises(Stopping):
        answerer.ask(Origin.slack_channel(PEOPLE, EMPLOYEE), "How many paid sick days are there per year?")
    assert answerer.in_process == 0


def test_kbbot_serve_answers_in_its_answering_processes_and_they_die_with_it(synced_data_dir, tmp_path):
    """`kbbot serve` with KBBOT_ANSWER_PROCESSES=2 as its own process: two answering processes, the answer;
    a Ctrl-C (to the whole process group) leaves them answering while the server drains, and no answering
    process is left behind by a kill -9 of the server."""
    import shutil

    from helpers.fake_slack import FakeSlack
    from helpers.slack_helpers import SlackSender
    from helpers.slackbot import slack_settings_for, spawn_serve

    shutil.copytree(synced_data_dir, tmp_path / "data")
    fake = FakeSlack().start()
    settings = slack_settings_for(tmp_path / "data", fake.api_url, KBBOT_SLACK_STREAMING="off")
    serve = spawn_serve(settings, tmp_path, KBBOT_ANSWER_PROCESSES="2", KBBOT_SLACK_WARMUP="off")
    try:
        serve.wait_healthy()
        sender = SlackSender(serve.url, fake)
        message, _ = sender.mention(PEOPLE, EMPLOYEE, "How many paid sick days are there per year?")
        [reply] = fake.wait_for(lambda: fake.bot_replies(PEOPLE, message["ts"]), timeout=120, what="the reply")
        assert "10 paid sick days" in reply_text(reply)
        workers = _answering(_children(serve.process.pid))
        assert len(workers) == 2, serve.log.read_text(errors="replace")[-2000:]
        fake.stalled.add("conversations.members")  # a question in a worker while the server stops
        sender.dm(CFO, FINANCE_QUESTION)
        fake.wait_for(lambda: fake.calls_of("conversations.members"), timeout=120, what="the membership lookup")
        for pid in (serve.process.pid, *workers):
            os.kill(pid, signal.SIGINT)
        time.sleep(2)
        assert all(_running(p) for p in workers), "an answering process stopped before its server"
        assert "starting another" not in serve.log.read_text(errors="replace")
        serve.process.kill()
        serve.process.wait(timeout=30)
        deadline = time.monotonic() + 20
        while any(os.path.exists(f"/proc/{p}") for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(os.path.exists(f"/proc/{p}") for p in workers), "an answering process outlived its server"
    finally:
        if serve.process.poll() is None:
            serve.process.kill()
        fake.stop()
