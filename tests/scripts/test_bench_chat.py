"""Smoke tests of scripts/bench_chat.py: tiny sizes, sane structure and behaviour, never speed."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import bench_chat

TINY = ["--sessions", "6", "--messages", "14", "--connections", "2", "--concurrency", "3"]


def test_chinese_numbers_read_as_chapter_numbers() -> None:
    assert [bench_chat.chinese_number(n) for n in (1, 5, 10, 12, 20, 25, 60, 99)] == [
        "一", "五", "十", "十二", "二十", "二十五", "六十", "九十九"]
    with pytest.raises(ValueError, match=r"1\.\.99"):
        bench_chat.chinese_number(100)


def test_scripts_are_deterministic_bilingual_and_alternate_questions() -> None:
    """A seed gives the same conversation; sessions alternate languages; answers alternate a question
    and a statement; the commands vary their numbers."""
    zh, en = bench_chat.session_script(0, 20, seed=3), bench_chat.session_script(1, 20, seed=3)
    assert zh == bench_chat.session_script(0, 20, seed=3)
    assert (zh.language, en.language, len(zh.turns)) == ("zh", "en", 20)
    assert [t.question for t in zh.turns] == [k % 2 == 0 for k in range(20)]
    assert all(t.reply.endswith(("?", "？")) == t.question for s in (zh, en) for t in s.turns)
    assert sum(bool(re.search(r"[\u4e00-\u9fff]", t.message)) for t in zh.turns) > 10
    assert sum(bool(re.search(r"[a-z]", t.message)) for t in en.turns) > 10
    many = [t.message for n in range(40) for t in bench_chat.session_script(n, 20, seed=3).turns]
    assert len(set(many)) > 100


def test_check_finds_a_wrong_context() -> None:
    """The last submit must carry the 8 messages before it, the question asked just before and a
    prompt within budget; a budget reduction excuses fewer recent messages, nothing else."""
    script = bench_chat.session_script(0, 10, seed=1)
    run = bench_chat.SessionRun(0, "s", normalized=[f"m{n}" for n in range(10)])
    run.submits = [bench_chat.Submit(n + 1, 1.0, False, False) for n in range(10)]
    run.last = {"context": {"recentUserMessages": [f"m{n}" for n in range(1, 9)],
                            "lastAssistantQuestion": script.turns[-2].reply},
                "currentUserMessage": "m9", "tokenCount": 900, "budget": {"tokenBudget": 4096},
                "reductions": []}
    assert bench_chat.check(run, script) == []
    run.last["context"]["recentUserMessages"] = [f"m{n}" for n in range(3, 9)]
    assert "recentUserMessages has 6" in bench_chat.check(run, script)[0]
    run.last["reductions"] = [{"step": "drop_recent"}]
    assert bench_chat.check(run, script) == []
    run.last["tokenCount"] = 5000
    assert bench_chat.check(run, script) == ["tokenCount 5000 is over tokenBudget 4096"]
    run.errors = ["CHAT_SESSION_NOT_FOUND"]
    assert bench_chat.check(run, script) == ["calls failed: CHAT_SESSION_NOT_FOUND"]


def test_whole_run_against_a_real_server(capsys: pytest.CaptureFixture[str]) -> None:
    """One tiny run end to end: every call succeeds, every session passes its check with 8 recent
    messages, submits past the threshold are split out, the later ones carry an extractive summary,
    the server's memory and CPU are read and it exits cleanly; the table renders from the same run."""
    assert bench_chat.main([*TINY, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["errors"] == {}
    assert report["checks"]["failed"] == 0
    assert report["checks"]["last_recent"] == {"8": 6}
    assert report["checks"]["last_with_summary"] == report["checks"]["last_extractive"] == 6
    assert report["submit"]["all"]["count"] == 6 * 14
    assert report["submit"]["upto_threshold"]["count"] == 6 * 6
    assert report["submit"]["past_threshold"]["count"] == 6 * 8
    assert report["reply"]["count"] == 6 * 14
    assert 0 < report["submit"]["all"]["p50"] <= report["submit"]["all"]["max"]
    assert [p["position"] for p in report["positions"]] == list(range(1, 15))
    assert report["positions"][0]["with_summary"] == 0
    assert report["memory"]["ready_rss_kib"] > 10_000
    assert report["memory"]["after_rss_kib"] > 10_000
    assert report["calls"]["server_cpu_s"] > 0
    assert report["server_exit"] == 0

    assert bench_chat.main(TINY) == 0
    table = capsys.readouterr().out
    assert "chat:submit, session > 12 messages (7..14)" in table
    assert "KiB per session" in table
    assert "Machine:" in table
