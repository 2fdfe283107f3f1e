"""The command chat over a real websocket: chat:submit/reply/reset/state against a server child.

Sessions live in memory only; rolling summaries come from a client that answers ``llm:complete``
or, without one, from the extractive fallback with ``SUMMARY_FALLBACK``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient, connected
from tests.support.process import ServerProcess, serving
from tests.support.scenarios import rpc_error

pytestmark = pytest.mark.server_flags("--debug", "--completion-timeout", "2")

SUMMARY_WAIT = 20.0  # seconds a test waits for a background summary before failing


async def submit(rpc: RpcClient, message: str, session_id: str | None = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": message, **extra}
    if session_id is not None:
        params["sessionId"] = session_id
    result: dict[str, Any] = await rpc.call("chat:submit", params)
    return result


async def settled_summary(rpc: RpcClient, session_id: str) -> dict[str, Any]:
    """chat:state once the session has a summary and none is being made."""
    deadline = time.monotonic() + SUMMARY_WAIT
    while True:
        state: dict[str, Any] = await rpc.call("chat:state", {"sessionId": session_id})
        if state["summary"] is not None and not state["summaryPending"]:
            return state
        assert time.monotonic() < deadline, "no summary in time"
        await asyncio.sleep(0.05)


async def test_the_seeds_normalization_example(rpc: RpcClient) -> None:
    """"how about workspace workspace 5" is sent on as "workspace 5", the original kept beside it."""
    result = await submit(rpc, "how about workspace workspace 5")
    assert result["message"] == {"original": "how about workspace workspace 5", "normalized": "workspace 5"}
    assert result["currentUserMessage"] == "workspace 5"
    assert result["prompt"].endswith("Current user message: workspace 5")
    zh = await submit(rpc, "请帮我打开第五章第五章", result["sessionId"])
    assert zh["message"]["normalized"] == "打开第五章"
    assert zh["sessionId"] == result["sessionId"]


async def test_a_twenty_message_session_holds_summary_last_eight_and_question(rpc: RpcClient) -> None:
    """After 20 messages: the summary, exactly the last 8 user messages before the current one,
    the last assistant message only while it is a question, and the seed's preamble."""
    first = await submit(rpc, "open chapter 1")
    sid = first["sessionId"]
    sent = ["open chapter 1"]
    for n in range(2, 11):  # 10 user messages, each answered: 20 messages
        await rpc.call("chat:reply", {"sessionId": sid, "content": f"Opened chapter {n - 1}."})
        await submit(rpc, f"open chapter {n}", sid)
        sent.append(f"open chapter {n}")
    reply = await rpc.call("chat:reply", {"sessionId": sid, "content": "Do you want to open chapter 11?"})
    assert reply["isQuestion"] is True
    await settled_summary(rpc, sid)
    result = await submit(rpc, "yes", sid)
    context = result["context"]
    assert context["recentUserMessages"] == sent[-8:]
    assert context["lastAssistantQuestion"] == "Do you want to open chapter 11?"
    assert context["summary"]
    assert any(w.startswith("SUMMARY_FALLBACK") for w in result["warnings"])
    assert result["summarySource"] == "extractive"
    numbered = "\n".join(f"  {n}) {text}" for n, text in enumerate(sent[-8:], start=1))
    assert result["messages"][-1] == {"role": "user", "content": (
        f"Context:\n- Summary: {context['summary']}\n- Recent user messages:\n{numbered}\n"
        "- Last assistant question: Do you want to open chapter 11?\n\nCurrent user message: yes")}
    # An answer that is not a question: no question in the next context.
    await rpc.call("chat:reply", {"sessionId": sid, "content": "Opened chapter 11."})
    after = await submit(rpc, "next one", sid)
    assert after["context"]["lastAssistantQuestion"] is None
    assert after["context"]["recentUserMessages"] == [*sent[-7:], "yes"]


async def test_a_question_flag_overrides_the_question_mark(rpc: RpcClient) -> None:
    """isQuestion decides when given; without it a reply ending in ？ is a question."""
    sid = (await submit(rpc, "打开第五章"))["sessionId"]
    flagged = await rpc.call("chat:reply", {"sessionId": sid, "content": "Which one", "isQuestion": True})
    assert flagged["isQuestion"] is True
    assert (await submit(rpc, "第五章", sid))["context"]["lastAssistantQuestion"] == "Which one"
    zh = await rpc.call("chat:reply", {"sessionId": sid, "content": "你是想打开第五章吗？"})
    assert zh["isQuestion"] is True
    denied = await rpc.call("chat:reply", {"sessionId": sid, "content": "Really?", "isQuestion": False})
    assert denied["isQuestion"] is False
    assert (await submit(rpc, "对", sid))["context"]["lastAssistantQuestion"] is None


async def test_a_tight_budget_drops_the_oldest_user_messages_first(rpc: RpcClient) -> None:
    """Under a small context budget the oldest recent messages go; tokenCount stays exact and within."""
    sid = None
    sent = []
    for n in range(1, 10):
        text = f"open the chapter where the lighthouse keeper meets stranger number {n}"
        sid = (await submit(rpc, text, sid))["sessionId"]
        sent.append(text)
    roomy = await submit(rpc, "chapter 5", sid)
    assert roomy["context"]["recentUserMessages"] == sent[-8:]
    tight = await submit(rpc, "chapter 6", sid, contextBudget=60)
    kept = tight["context"]["recentUserMessages"]
    assert 0 < len(kept) < 8
    assert kept == [*sent[-7:], "chapter 5"][-len(kept):]
    assert [r["step"] for r in tight["reductions"]] == ["cap_recent"]
    whole = roomy["tokenCount"] - 30
    squeezed = await submit(rpc, "chapter 7", sid, tokenBudget=whole)
    assert squeezed["tokenCount"] <= whole
    assert squeezed["budget"]["tokenBudget"] == whole
    assert len(squeezed["context"]["recentUserMessages"]) < 8
    refused = await rpc_error(rpc, "chat:submit",
                              {"sessionId": sid, "message": "chapter 8", "tokenBudget": 64})
    assert refused["data"]["code"] == "CHAT_BUDGET_TOO_SMALL"


async def test_reset_forgets_messages_and_summary(rpc: RpcClient) -> None:
    """After chat:reset the same session starts over: no recent messages, no summary."""
    sid = (await submit(rpc, "open chapter 1"))["sessionId"]
    for n in range(2, 16):
        await submit(rpc, f"open chapter {n}", sid)
    await settled_summary(rpc, sid)
    assert await rpc.call("chat:reset", {"sessionId": sid}) == {"ok": True}
    state = await rpc.call("chat:state", {"sessionId": sid})
    assert (state["messages"], state["summary"]) == ([], None)
    fresh = await submit(rpc, "chapter 2", sid)
    assert fresh["context"] == {"summary": None, "recentUserMessages": [], "lastAssistantQuestion": None}


async def test_unknown_sessions_and_bad_input_have_stable_codes(rpc: RpcClient) -> None:
    """Unknown ids, blank and overlong messages and out-of-range options are refused by code."""
    for method, params in (("chat:submit", {"sessionId": "nope", "message": "hi"}),
                           ("chat:reply", {"sessionId": "nope", "content": "hi"}),
                           ("chat:reset", {"sessionId": "nope"}),
                           ("chat:state", {"sessionId": "nope"})):
        assert (await rpc_error(rpc, method, params))["data"]["code"] == "CHAT_SESSION_NOT_FOUND"
    assert (await rpc_error(rpc, "chat:submit", {"message": "   "}))["data"]["code"] == "INVALID_PARAMS"
    nine = await rpc_error(rpc, "chat:submit", {"message": "x", "recent": 9})
    assert nine["data"]["code"] == "INVALID_PARAMS"
    long = await rpc_error(rpc, "chat:submit", {"message": "字" * 8001})
    assert long["data"] == {"code": "CHAT_MESSAGE_TOO_LONG", "length": 8001, "limit": 8000}
    missing = await rpc_error(rpc, "chat:submit", {"message": "x", "projectId": "p-missing"})
    assert missing["data"]["code"] == "PROJECT_NOT_FOUND"


async def test_a_client_that_answers_llm_complete_makes_the_summary(proc: ServerProcess,
                                                                   rpc: RpcClient) -> None:
    """A connection that declared completions gets llm:complete and its answer is the summary."""
    async with connected(proc.url, proc.token) as model:
        declared = await model.call("system:capabilities", {"completions": True})
        assert "completions" in declared["capabilities"]
        sid = (await submit(rpc, "open chapter 1"))["sessionId"]
        for n in range(2, 14):
            await submit(rpc, f"open chapter {n}", sid)
        request = await model.next_request(timeout=SUMMARY_WAIT)
        assert request["method"] == "llm:complete"
        params = request["params"]
        assert params["purpose"] == "chat.summary"
        assert params["maxTokens"] > 0
        assert [m["role"] for m in params["messages"]] == ["system", "user"]
        assert "open chapter 1" in params["messages"][1]["content"]
        await model.respond(request["id"], {"content": "User is opening chapters in order."})
        state = await settled_summary(rpc, sid)
        assert (state["summary"], state["summarySource"]) == ("User is opening chapters in order.", "client")
        result = await submit(rpc, "chapter 14", sid)
        assert result["context"]["summary"] == "User is opening chapters in order."
        assert result["summarySource"] == "client"
        assert not any(w.startswith("SUMMARY_FALLBACK") for w in result["warnings"])
        await model.call("system:capabilities", {"completions": False})


async def test_a_client_that_errs_or_never_answers_falls_back_without_a_hang(
        proc: ServerProcess, rpc: RpcClient) -> None:
    """A client's error, or its silence past the timeout, gives the extractive summary with
    SUMMARY_FALLBACK; submits answer at once meanwhile."""
    async with connected(proc.url, proc.token) as silent:
        await silent.call("system:capabilities", {"completions": True, "completionTimeoutMs": 1000})
        sid = (await submit(rpc, "打开第一章"))["sessionId"]
        for n in range(2, 14):
            await submit(rpc, f"打开第{n}章", sid)
        request = await silent.next_request(timeout=SUMMARY_WAIT)
        assert request["method"] == "llm:complete"
        started = time.monotonic()
        during = await submit(rpc, "第十四章", sid)  # never waits for the silent client
        assert during["sessionId"] == sid
        state = await settled_summary(rpc, sid)
        assert state["summarySource"] == "extractive"
        assert time.monotonic() - started < SUMMARY_WAIT
        result = await submit(rpc, "下一章", sid)
        assert any(w.startswith("SUMMARY_FALLBACK") for w in result["warnings"])
        await silent.call("system:capabilities", {"completions": False})
    async with connected(proc.url, proc.token) as failing:
        await failing.call("system:capabilities", {"completions": True})
        sid = (await submit(rpc, "open chapter 1"))["sessionId"]
        for n in range(2, 14):
            await submit(rpc, f"open chapter {n}", sid)
        request = await failing.next_request(timeout=SUMMARY_WAIT)
        await failing.respond_error(request["id"], -32603, "model exploded at /home/someone")
        state = await settled_summary(rpc, sid)
        assert state["summarySource"] == "extractive"
        assert "exploded" not in state["summary"]
        assert "exploded" not in proc.stderr_text()


def test_a_restarted_server_knows_no_session_and_wrote_nothing(tmp_path: Path) -> None:
    """Sessions die with the process: after a restart the id is unknown, and no message text was
    written anywhere in the data dir (database, logs). chat:state is refused outside debug mode."""
    canary = "open the chapter named zebracanary"
    data = tmp_path / "data"

    async def first(proc: ServerProcess) -> str:
        async with connected(proc.url, proc.token) as rpc:
            sid = str((await submit(rpc, canary))["sessionId"])
            await rpc.call("chat:reply", {"sessionId": sid, "content": "Which zebracanary chapter?"})
            forbidden = await rpc_error(rpc, "chat:state", {"sessionId": sid})
            assert forbidden["data"]["code"] == "CHAT_STATE_FORBIDDEN"
            return sid

    async def second(proc: ServerProcess, sid: str) -> None:
        async with connected(proc.url, proc.token) as rpc:
            error = await rpc_error(rpc, "chat:submit", {"sessionId": sid, "message": "again"})
            assert error["data"]["code"] == "CHAT_SESSION_NOT_FOUND"

    with serving(data) as proc:
        sid = asyncio.run(first(proc))
    with serving(data) as proc:
        asyncio.run(second(proc, sid))
    written = [p for p in data.rglob("*") if p.is_file() and b"zebracanary" in p.read_bytes()]
    assert written == []
