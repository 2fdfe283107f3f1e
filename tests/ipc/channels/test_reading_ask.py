"""reading:ask through the app's real registry and a dispatcher: its params, its result's window and
parts, and its refusals."""

from __future__ import annotations

import pytest

from tests.ipc.channels.conftest import Rpc
from tests.support.reading_book import chapter_one

# The module shares one event loop with its services (see conftest.services).
pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _book(rpc: Rpc, project_id: str) -> None:
    await rpc.call("document:write", {"projectId": project_id, "documentId": "ch01.md",
                                      "text": chapter_one()})


async def test_ask_returns_the_prompt_its_window_and_its_parts(rpc: Rpc, project_id: str) -> None:
    """The result is context:assemble's for the reading-companion profile, with the window (and the
    book's page count) and every part offered with its pages."""
    await _book(rpc, project_id)
    question = "Who waited below with the rope?"
    params = {"projectId": project_id, "start": 1, "end": 4, "tokenBudget": 2048, "question": question}
    result = await rpc.call("reading:ask", params)
    assert result["profileId"] == "reading-companion"
    assert result["window"] == {"start": 1, "end": 4, "pageCount": 12}
    assert result["budget"]["contextWindow"] == 2048
    assert result["parts"]
    assert all(p["kind"] == "paragraph" and p["pages"][1] <= 4 for p in result["parts"])
    assert [m["role"] for m in result["messages"]] == ["system", "user"]


@pytest.mark.parametrize(("params", "field"), [
    ({"start": 1, "end": 13, "question": "Who?"}, "end"),
    ({"start": 0, "end": 3, "question": "Who?"}, "start"),
    ({"start": 1, "end": 3, "question": "   "}, "question"),
])
async def test_a_bad_window_or_a_blank_question_is_invalid_params(
        rpc: Rpc, project_id: str, params: dict[str, object], field: str) -> None:
    """A page outside the book, a page 0 or a blank question is INVALID_PARAMS, the field named."""
    await _book(rpc, project_id)
    error = await rpc.error("reading:ask", {"projectId": project_id, **params})
    assert error["data"]["code"] == "INVALID_PARAMS"
    assert field in str(error["data"])


async def test_an_unknown_project_or_an_unknown_field_is_refused(rpc: Rpc) -> None:
    """An unknown project is PROJECT_NOT_FOUND; a snake_case field is INVALID_PARAMS (strict params)."""
    params = {"projectId": "0" * 16, "start": 1, "end": 1, "question": "Who?"}
    missing = await rpc.error("reading:ask", params)
    assert missing["data"]["code"] == "PROJECT_NOT_FOUND"
    extra = await rpc.error("reading:ask", {**params, "token_budget": 100})
    assert extra["data"]["code"] == "INVALID_PARAMS"
