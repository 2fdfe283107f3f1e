"""The reading companion over a real websocket (seed 000): the book's layout, the summaries a level
lacks with the seed's prompts, refused summaries, and citation checks, on a bilingual book of three
chapters and more than thirty pages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient
from tests.support.scenarios import Project, rpc_error

MARK = "\n<!-- page -->\n"


def chapter_one() -> str:
    pages = [f"Mira climbed the stair of the lighthouse on day {n}. The lamp was cold.\n\n"
             f"Han waited below with the rope, counting the waves ({n})." for n in range(1, 13)]
    return "# The Lighthouse\n\n" + MARK.join(pages)


def chapter_two() -> str:
    pages = [f"苏晚在第{n}天点亮了灯。风很大，海浪拍打着礁石。\n\n她想起了那艘沉船和船上的人。"
             for n in range(1, 13)]
    return "# 第二章\n\n" + MARK.join(pages)


def chapter_three() -> str:
    pages = [f"The storm reached the harbour on night {n}. Nobody slept.\n\nThe keeper wrote in the log."
             for n in range(1, 11)]
    return "# The Storm\n\n" + MARK.join(pages)


def summary(*pages: int) -> dict[str, Any]:
    return {"entities": [{"name": "mira", "type": "character", "mentions": 1, "page_spans": list(pages)}],
            "events": [], "relationships": [], "facts": [], "open_questions": []}


@pytest.fixture
async def book(rpc: RpcClient, tmp_path: Path) -> Project:
    project = await Project.open(rpc, tmp_path / "book", language="en")
    for name, text in (("ch01.md", chapter_one()), ("ch02.md", chapter_two()), ("ch03.md", chapter_three())):
        await project.write(name, text)
    return project


async def layout(rpc: RpcClient, project: Project) -> dict[str, Any]:
    result: dict[str, Any] = (await rpc.call("reading:layout", {"projectId": project.project_id}))["layout"]
    return result


async def test_layout_is_stable_under_an_edit_of_page_20(rpc: RpcClient, book: Project) -> None:
    """Three chapters, 34 pages; editing page 20 leaves pages 1-19 (numbers and hashes) as they were
    and their summaries current."""
    before = await layout(rpc, book)
    pages = [p for c in before["chapters"] for p in c["pages"]]
    assert [c["documentId"] for c in before["chapters"]] == ["ch01.md", "ch02.md", "ch03.md"]
    assert len(pages) == before["pageCount"] >= 30
    for n in range(1, 20):
        page_paragraphs = pages[n - 1]["paragraphs"]
        for intra in range(1, page_paragraphs + 1):
            await rpc.call("reading:summaries:put", {"projectId": book.project_id, "level": "paragraph",
                                                     "unit": f"p{n}.{intra}", "summary": summary(n)})
    text = chapter_two().replace("苏晚在第8天点亮了灯。", "苏晚在第8天很晚才点亮了灯。")
    assert text != chapter_two()
    await book.write("ch02.md", text)
    after = await layout(rpc, book)
    pages_after = [p for c in after["chapters"] for p in c["pages"]]
    assert pages_after[:19] == pages[:19]
    assert pages_after[19]["hash"] != pages[19]["hash"]
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
