"""The reading companion over a real websocket (seed 000): the book's layout, the summaries a level
lacks with the seed's prompts, refused summaries, and citation checks, on a bilingual book of three
chapters and more than thirty pages; the roll-up driven through a client that answers llm:complete,
with $/progress; the page size as a project setting."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient, connected
from tests.support.process import ServerProcess
from tests.support.reading_book import CHAPTERS, MARK, chapter_two, summary
from tests.support.scenarios import Project, rpc_error


@pytest.fixture
async def book(rpc: RpcClient, tmp_path: Path) -> Project:
    project = await Project.open(rpc, tmp_path / "book", language="en")
    for name, make in CHAPTERS:
        await project.write(name, make())
    return project


async def layout(rpc: RpcClient, project: Project) -> dict[str, Any]:
    result: dict[str, Any] = await rpc.call("reading:layout", {"projectId": project.project_id})
    return result


async def test_layout_is_stable_under_an_edit_of_page_20(rpc: RpcClient, book: Project) -> None:
    """Three chapters, 34 pages; editing page 20 leaves pages 1-19 (numbers, hashes and summary states)
    as they were, their summaries current, and marks page 20's summary stale. A page may be named by
    its number, and a summary given as the model's JSON text."""
    first = await layout(rpc, book)
    assert [c["documentId"] for c in first["chapters"]] == ["ch01.md", "ch02.md", "ch03.md"]
    assert first["pageCount"] >= 30
    for n in range(1, 21):
        page = [p for c in first["chapters"] for p in c["pages"]][n - 1]
        for intra in range(1, page["paragraphs"] + 1):
            await rpc.call("reading:summaries:put", {"projectId": book.project_id, "level": "paragraph",
                                                     "unit": f"p{n}.{intra}", "summary": summary(n)})
    await rpc.call("reading:summaries:put", {"projectId": book.project_id, "level": "page", "unit": 19,
                                             "summary": summary(19)})
    await rpc.call("reading:summaries:put", {"projectId": book.project_id, "level": "page", "unit": "20",
                                             "summary": "```json\n" + json.dumps(summary(20)) + "\n```"})
    before = await layout(rpc, book)
    pages = [p for c in before["chapters"] for p in c["pages"]]
    assert [p["summary"] for p in pages[18:21]] == ["current", "current", "missing"]
    text = chapter_two().replace("苏晚在第8天点亮了灯。", "苏晚在第8天很晚才点亮了灯。")
    assert text != chapter_two()
    await book.write("ch02.md", text)
    after = await layout(rpc, book)
    pages_after = [p for c in after["chapters"] for p in c["pages"]]
    assert pages_after[:19] == pages[:19]
    assert pages_after[19]["hash"] != pages[19]["hash"]
    assert pages_after[19]["summary"] == "stale"
    assert pages_after[19]["paragraphSummaries"] < pages[19]["paragraphSummaries"]
    assert after["chapters"][1]["summary"] == "missing"
    pending = await rpc.call("reading:summaries:pending", {"projectId": book.project_id,
                                                           "level": "paragraph"})
    stale = {p["unit"] for p in pending["pending"]}
    assert not any(int(unit[1:].split(".")[0]) < 20 for unit in stale)
    assert "p20.1" in stale


async def test_pending_prompts_are_the_seeds_templates(rpc: RpcClient, book: Project) -> None:
    """A paragraph's prompt is the seed's with its page, index and text; a page's roll-up appears once
    its paragraphs are summarised, with their JSON and its number."""
    pending = await rpc.call("reading:summaries:pending", {"projectId": book.project_id,
                                                           "level": "paragraph"})
    first = next(p for p in pending["pending"] if p["unit"] == "p2.1")
    system, user = (m["content"] for m in first["messages"])
    assert system.startswith(
        "You are TaleLeaf's assistant. You ONLY know the provided paragraph from pages 2.")
    assert user.startswith('Paragraph (p2.1): """Mira climbed the stair of the lighthouse on day 2.')
    assert "Overall ≤ 85 tokens across all fields." in user
    pages = await rpc.call("reading:summaries:pending", {"projectId": book.project_id, "level": "page"})
    assert "2" not in {p["unit"] for p in pages["pending"]}
    for intra in (1, 2):
        await rpc.call("reading:summaries:put", {"projectId": book.project_id, "level": "paragraph",
                                                 "unit": f"p2.{intra}", "summary": summary(2)})
    pages = await rpc.call("reading:summaries:pending", {"projectId": book.project_id, "level": "page"})
    page_two = next(p for p in pages["pending"] if p["unit"] == "2")
    system, user = (m["content"] for m in page_two["messages"])
    assert "concise page summary JSON for page 2. No spoilers beyond this page." in system
    assert "Keep total ≤ 120 tokens when rendered." in system
    assert user.startswith("Paragraph JSON payloads for page 2:\n")
    assert len(json.loads(user.split("\n", 1)[1])) == 2


async def test_malformed_overlong_and_spoiling_summaries_are_refused(rpc: RpcClient, book: Project) -> None:
    """Each refusal has its code and the offending path; a page-12 summary citing page 13 is a spoiler."""
    base = {"projectId": book.project_id, "level": "page", "unit": "12"}
    spoiler = await rpc_error(rpc, "reading:summaries:put", {**base, "summary": summary(12, 13)})
    assert spoiler["data"] == {"code": "READING_SPOILER", "path": "/entities/0/page_spans/1", "page": 13,
                               "allowed": [12, 12]}
    bad = summary(12)
    bad["entities"][0]["name"] = "Mira"
    invalid = await rpc_error(rpc, "reading:summaries:put", {**base, "summary": bad})
    assert invalid["data"]["code"] == "READING_SUMMARY_INVALID"
    assert invalid["data"]["path"] == "/entities/0/name"
    long = summary(12)
    long["facts"] = ["The lamp was cold and the rope was wet. " * 12]
    too_long = await rpc_error(rpc, "reading:summaries:put", {**base, "summary": long})
    assert too_long["data"]["code"] == "READING_SUMMARY_TOO_LONG"
    assert too_long["data"]["limit"] == 120
    missing = await rpc_error(rpc, "reading:summaries:put", {**base, "unit": "999", "summary": summary(999)})
    assert missing["data"]["code"] == "READING_UNIT_NOT_FOUND"


async def test_validation_catches_out_of_window_citations_in_both_styles(rpc: RpcClient,
                                                                         book: Project) -> None:
    """(p13) and （第13页） outside pages 1-12 are reported with a restate prompt; cited claims inside
    pass."""
    window = {"projectId": book.project_id, "start": 1, "end": 12}
    english = await rpc.call("reading:validate", {
        **window, "answer": "Mira climbed the stair (p2). The ship sank (p13)."})
    assert not english["ok"]
    assert [c["pages"] for c in english["outside"]] == [[13, 13]]
    assert "12" in english["restate"]
    answer = "苏晚点亮了灯（第3页）。船沉了（第13–14页）。"
    chinese = await rpc.call("reading:validate", {**window, "answer": answer})
    assert [c["pages"] for c in chinese["outside"]] == [[13, 14]]
    fine = await rpc.call("reading:validate", {**window, "answer": "Han waited below (pp. 3-4)."})
    assert fine["ok"]
    assert fine["restate"] is None


def short_book() -> dict[str, str]:
    """Two chapters of three marked pages, English then Chinese, two paragraphs a page."""
    english = MARK.join(f"Mira lit the lamp on night {n}.\n\nHan held the rope ({n})." for n in range(1, 4))
    chinese = MARK.join(f"苏晚在第{n}夜守着灯。\n\n风从海上来。" for n in range(1, 4))
    return {"a1.md": english, "a2.md": chinese}


def answer(params: dict[str, Any]) -> str:
    """A valid summary of the unit an llm:complete request is for, citing its first page; a page's is
    fenced as Markdown, as models often do."""
    page = int(re.search(r"pages? (\d+)", params["messages"][0]["content"]).group(1))  # type: ignore[union-attr]
    body = json.dumps(summary(page))
    return f"```json\n{body}\n```" if params["purpose"] == "reading.summary.page" else body


@contextlib.asynccontextmanager
async def completing_client(proc: ServerProcess, asked: list[dict[str, Any]]) -> AsyncIterator[RpcClient]:
    """A second connection that declared completions and answers every llm:complete; page 2's first
    request is answered with a spoiler (it cites page 3)."""
    async with connected(proc.url, proc.token) as model:
        await model.call("system:capabilities", {"completions": True})

        async def serve() -> None:
            while True:
                request = await model.requests.get()
                params = request["params"]
                asked.append(params)
                text = answer(params)
                if params["purpose"] == "reading.summary.page" and "for page 2." in \
                        params["messages"][0]["content"] and len(params["messages"]) == 2:
                    text = json.dumps(summary(2, 3))
                await model.respond(request["id"], {"content": text})

        task = asyncio.ensure_future(serve())
        try:
            yield model
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await model.call("system:capabilities", {"completions": False})


async def test_run_drives_the_roll_up_through_a_completing_client(proc: ServerProcess, rpc: RpcClient,
                                                                  tmp_path: Path) -> None:
    """reading:summaries:run asks the completing connection for every paragraph, page and chapter (a
    spoiling answer is refused and asked again with the problem), reports $/progress begin..end to a
    subscriber, and leaves nothing pending; reading:layout then counts every summary as current."""
    project = await Project.open(rpc, tmp_path / "short", language="en")
    for name, text in short_book().items():
        await project.write(name, text)
    await rpc.call("system:subscribe", {"topics": ["progress"]})
    asked: list[dict[str, Any]] = []
    token = f"reading/{project.project_id}"
    async with completing_client(proc, asked):
        result = await rpc.call("reading:summaries:run", {"projectId": project.project_id})
    assert result == {"level": "chapter", "warnings": [], "levels": {
        "paragraph": {"done": 12, "refused": 0, "failed": 0, "remaining": 0},
        "page": {"done": 6, "refused": 0, "failed": 0, "remaining": 0},
        "chapter": {"done": 2, "refused": 0, "failed": 0, "remaining": 0}}}
    retried = [p for p in asked if len(p["messages"]) == 4]
    assert len(retried) == 1
    assert "READING_SPOILER" in retried[0]["messages"][3]["content"]
    assert len(asked) == 12 + 6 + 2 + 1
    progress: list[dict[str, Any]] = []
    while not progress or progress[-1]["kind"] != "end":
        note = await asyncio.wait_for(rpc.notifications.get(), 10)
        if note["method"] == "$/progress" and note["params"]["token"] == token:
            progress.append(note["params"]["value"])
    assert progress[0]["kind"] == "begin"
    assert (progress[0]["done"], progress[0]["total"]) == (0, 20)
    assert (progress[-1]["done"], progress[-1]["total"], progress[-1]["percentage"]) == (20, 20, 100)
    assert {"paragraph", "page", "chapter"} <= {v["level"] for v in progress}
    await rpc.call("system:subscribe", {"topics": []})
    for level in ("paragraph", "page", "chapter"):
        pending = await rpc.call("reading:summaries:pending", {"projectId": project.project_id,
                                                               "level": level})
        assert (pending["pending"], pending["waiting"]) == ([], 0)
    assert (await layout(rpc, project))["summaries"] == {"paragraph": 12, "page": 6, "chapter": 2}


async def test_run_without_a_completing_client_is_refused(rpc: RpcClient, book: Project) -> None:
    """No connection declared completions: READING_NO_COMPLETER, and nothing was stored."""
    error = await rpc_error(rpc, "reading:summaries:run", {"projectId": book.project_id, "level": "page"})
    assert (error["code"], error["data"]) == (-32094, {"code": "READING_NO_COMPLETER"})
    assert (await layout(rpc, book))["summaries"] == {"paragraph": 0, "page": 0, "chapter": 0}


async def test_the_page_size_setting_lays_the_book_out_again(rpc: RpcClient, tmp_path: Path) -> None:
    """A chapter without page markers: one page at the default 400 tokens, several once the project's
    readingPageTokens is 60, each page within it."""
    project = await Project.open(rpc, tmp_path / "unmarked", language="en")
    await project.write("c1.md", "\n\n".join(f"The keeper wrote the weather in the log on night {n}, as "
                                              "every night before." for n in range(1, 13)))
    before = await layout(rpc, project)
    assert (before["pageTokens"], before["pageCount"]) == (400, 1)
    assert (await project.update_settings(readingPageTokens=60))["readingPageTokens"] == 60
    after = await layout(rpc, project)
    assert after["pageTokens"] == 60
    assert after["pageCount"] > 1
    assert all(p["tokens"] <= 60 for c in after["chapters"] for p in c["pages"])
