"""reading:ask over a real websocket (seed 000): the seed's answer prompt from pages start..end only,
with a spoiler planted on the page after the window in the text, in stored summaries and in the
retrieval index, on the bilingual 34-page book."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient
from tests.support.golden_corpus import wait_settled
from tests.support.reading_book import CHAPTERS, chapter_one, chapter_two, summary
from tests.support.scenarios import Project, rpc_error

SPOILER = "Secret: Han sank the Aurora on purpose."
QUESTION = "Who sank the Aurora?"


@pytest.fixture
async def book(rpc: RpcClient, tmp_path: Path) -> Project:
    """The book, with the Aurora seen on page 5 and the spoiler on page 13 (chapter two's first page),
    indexed; chapter one, page 12 and the spoiling page 13 and chapter two summarised."""
    project = await Project.open(rpc, tmp_path / "book", language="en")
    texts = {name: make() for name, make in CHAPTERS}
    seen = "on day 5. The lamp was cold. Far out, the Aurora passed the rocks."
    texts["ch01.md"] = chapter_one().replace("on day 5. The lamp was cold.", seen)
    texts["ch02.md"] = chapter_two().replace("苏晚在第1天点亮了灯。", f"苏晚在第1天点亮了灯。{SPOILER}")
    for name, text in texts.items():
        await project.write(name, text)
    await wait_settled(rpc, [project.project_id])
    for level, unit, pages, fact in (("chapter", "1", (1, 12), "ch1 fact: mira keeps the lamp"),
                                     ("page", "12", (12,), "page12 fact: mira saw the aurora"),
                                     ("page", "13", (13,), "spoiler fact: han sank the aurora"),
                                     ("chapter", "2", (13, 24), "spoiler chapter: han is the traitor")):
        await rpc.call("reading:summaries:put", {"projectId": project.project_id, "level": level,
                                                 "unit": unit, "summary": summary(*pages, facts=(fact,))})
    return project


async def ask(rpc: RpcClient, project: Project, start: int, end: int, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = await rpc.call("reading:ask", {"projectId": project.project_id, "start": start,
                                                            "end": end, "question": QUESTION, **extra})
    return result


async def test_the_whole_book_reaches_the_planted_spoilers(rpc: RpcClient, book: Project) -> None:
    """With all 34 pages read, the spoiler is found: by the index (page 13's paragraph as evidence) and
    in the summaries (page 13's and chapter two's; p13.1 is chapter two's heading), so the window test
    below is not vacuous."""
    result = await ask(rpc, book, 1, 34, tokenBudget=8192)
    assert "Aurora on purpose" in result["prompt"]
    assert "spoiler fact: han sank the aurora" in result["prompt"]
    assert "spoiler chapter: han is the traitor" in result["prompt"]
    assert {"paragraph:p13.2", "page:13", "chapter:2"} <= {p["id"] for p in result["parts"]
                                                         if p["fate"] != "dropped"}


async def test_pages_1_to_12_never_show_page_13_onward(rpc: RpcClient, book: Project) -> None:
    """For pages 1-12 the prompt holds nothing from page 13 on, whatever the text, the summaries or
    the index hold: every part it keeps draws on pages 1-12 only, and the evidence it does find
    (page 5's Aurora) is there with its paragraph number."""
    result = await ask(rpc, book, 1, 12)
    prompt = result["prompt"]
    for spoiler in ("Aurora on purpose", "spoiler", "苏晚", "storm"):
        assert spoiler not in prompt
    kept = [p for p in result["parts"] if p["fate"] != "dropped"]
    assert kept
    assert all(1 <= p["pages"][0] <= p["pages"][1] <= 12 for p in kept)
    assert ("(p5.1) Mira climbed the stair of the lighthouse on day 5. The lamp was cold. Far out, the "
            "Aurora passed the rocks.") in prompt
    assert "ch1 fact: mira keeps the lamp" in prompt
    assert result["window"] == {"start": 1, "end": 12, "pageCount": 34}


async def test_the_prompt_is_the_seeds_answer_template(rpc: RpcClient, book: Project) -> None:
    """The system message is the seed's with the window filled in; the user message is the seed's
    Question / Context / Instructions template, each context list under its own heading."""
    result = await ask(rpc, book, 1, 12)
    system, user = result["messages"]
    assert system == {"role": "system", "content": (
        "You are TaleLeaf's assistant. You ONLY know content from pages 1–12 of this book. Do NOT reveal, "
        "speculate about, or reference events beyond page 12. If the question asks for content beyond this "
        "range, explain it is outside the current reading window. Cite the page number(s) for each factual "
        "statement. Keep the answer concise.")}
    lines = user["content"].split("\n")
    assert lines[:3] == [f'Question: "{QUESTION}"', "Context:", "- Chapter summaries (within window):"]
    assert lines[3].startswith("Chapter 1 “The Lighthouse” (pp1–12): {")
    assert "- Page summaries (for relevant pages):" in lines
    assert "- Paragraph evidence (selected, trimmed):" in lines
    assert user["content"].endswith(
        "\n\nInstructions:\n- Use the most relevant context only.\n- For each claim, include citations like "
        "(p12) or (pp12–13).\n- If you lack sufficient evidence within pages 1–12, say so explicitly.")
    assert result["tokenCount"] <= result["budget"]["total"]
    assert result["profileId"] == "reading-companion"


async def test_a_short_budget_gives_up_evidence_before_summaries(rpc: RpcClient, book: Project) -> None:
    """Trimmed to a small budget, paragraph evidence goes first, then page summaries; the chapter
    summary outlives them, and the prompt stays within its budget."""
    full = await ask(rpc, book, 1, 12)
    needed = full["tokenCount"]
    short = await ask(rpc, book, 1, 12, tokenBudget=needed - 60, outputReserve=0)
    fates = {p["id"]: p["fate"] for p in short["parts"]}
    assert short["tokenCount"] <= short["budget"]["total"]
    assert any(f == "dropped" for i, f in fates.items() if i.startswith("paragraph:"))
    assert fates["chapter:1"] != "dropped"
    assert fates["page:12"] != "dropped"


async def test_a_window_outside_the_book_is_invalid(rpc: RpcClient, book: Project) -> None:
    """A page past the book's last, or an end before the start, is INVALID_PARAMS naming the field."""
    past = await rpc_error(rpc, "reading:ask", {"projectId": book.project_id, "start": 1, "end": 35,
                                                "question": QUESTION})
    assert past["data"]["code"] == "INVALID_PARAMS"
    assert past["data"]["field"] == "end"
    assert past["data"]["pageCount"] == 34
    backwards = await rpc_error(rpc, "reading:ask", {"projectId": book.project_id, "start": 12, "end": 3,
                                                     "question": QUESTION})
    assert backwards["data"]["code"] == "INVALID_PARAMS"
