"""The chat's view of the writer's projects: titles read from the start of each document."""

from __future__ import annotations

from typing import Any

from services.chat.workspace import ProjectWorkspace, title_of


def test_the_title_is_the_first_line_without_heading_marks() -> None:
    """Blank lines are skipped, Markdown heading marks dropped, an empty document has no title."""
    assert title_of("\n\n## 第五章 灯塔\n正文") == "第五章 灯塔"
    assert title_of("Chapter 5: Harbor\ntext") == "Chapter 5: Harbor"
    assert title_of("  \n") is None
    assert title_of("#" * 3) is None
    assert len(title_of("x" * 500) or "") == 200


async def test_the_workspace_adapts_projects_and_document_heads() -> None:
    """Projects become (id, name) pairs; document heads become (id, title) pairs."""

    class Record:
        project_id = "p1"
        name = "Moonfall"

    async def get(project_id: str) -> Any:
        return Record()

    async def listing() -> list[Any]:
        return [Record()]

    async def heads(project_id: str, limit: int) -> list[tuple[str, str]]:
        assert limit > 0
        return [("ch01.md", "# Arrival\n..."), ("empty.md", "")]

    workspace = ProjectWorkspace(get, listing, heads)
    await workspace.require_project("p1")
    assert await workspace.projects() == [("p1", "Moonfall")]
    assert await workspace.documents("p1") == [("ch01.md", "Arrival"), ("empty.md", None)]
