"""EpisodicMemoryService: past interactions, newest first, bounded, scoped to a project."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from services.errors import InvalidInput, ProjectNotFound, ProjectScopeViolation, RecordNotFound
from services.memory import EpisodicMemoryService
from services.projects import ProjectRecord
from services.store import Database


@pytest.fixture
def service(database: Database) -> EpisodicMemoryService:
    return EpisodicMemoryService(database)


async def test_add_and_list_newest_first(project: ProjectRecord, service: EpisodicMemoryService) -> None:
    """Episodes come back newest first, with their instruction, output, document and skill."""
    first = await service.add(project.id, instruction="续写", output="林远推开门。",
                              document_id="第一章.md", skill_id="continue")
    second = await service.add(project.id, output="她笑了。")
    assert (first.document_id, first.skill_id, second.instruction) == ("第一章.md", "continue", "")
    assert [e.id for e in await service.list(project.id)] == [second.id, first.id]
    assert first.created_at.tzinfo is not None


async def test_list_limit_and_filters(project: ProjectRecord, service: EpisodicMemoryService) -> None:
    """`limit` caps the newest taken; documentId and skillId narrow the list."""
    for i in range(5):
        await service.add(project.id, output=f"o{i}", document_id="a.md" if i % 2 else "b.md",
                          skill_id="rewrite" if i < 2 else "continue")
    assert [e.output for e in await service.list(project.id, limit=2)] == ["o4", "o3"]
    assert [e.output for e in await service.list(project.id, document_id="a.md")] == ["o3", "o1"]
    assert [e.output for e in await service.list(project.id, skill_id="rewrite")] == ["o1", "o0"]


async def test_another_projects_episode_is_not_found(project: ProjectRecord,
                                                     other_project: ProjectRecord,
                                                     service: EpisodicMemoryService) -> None:
    """Episodes of one project never list in another, and cannot be deleted from it."""
    theirs = await service.add(other_project.id, output="theirs")
    assert await service.list(project.id) == []
    with pytest.raises(RecordNotFound):
        await service.delete(project.id, theirs.id)
    await service.delete(other_project.id, theirs.id)
    assert await service.list(other_project.id) == []


@pytest.mark.parametrize(("fields", "error"), [
    ({"output": ""}, InvalidInput), ({"output": "x", "skill_id": "bad id"}, InvalidInput),
    ({"output": "x", "instruction": "i" * 10_001}, InvalidInput),
    ({"output": "x", "document_id": "notes.json"}, InvalidInput),
    ({"output": "x", "document_id": "../escape.md"}, ProjectScopeViolation),
])
async def test_invalid_episodes_are_refused(fields: dict[str, object], error: type[Exception],
                                            project: ProjectRecord,
                                            service: EpisodicMemoryService) -> None:
    """Empty output, bad skill ids, long instructions and bad document ids are refused."""
    with pytest.raises(error):
        await service.add(project.id, **fields)  # type: ignore[arg-type]
    assert await service.list(project.id) == []


@pytest.mark.parametrize("limit", [0, 201])
async def test_list_limit_is_bounded(limit: int, project: ProjectRecord,
                                     service: EpisodicMemoryService) -> None:
    """A limit outside 1..200 is INVALID_PARAMS."""
    with pytest.raises(InvalidInput):
        await service.list(project.id, limit=limit)


async def test_unknown_project(service: EpisodicMemoryService) -> None:
    """Every method on a project that does not exist is PROJECT_NOT_FOUND."""
    for call in (service.list("nope"), service.add("nope", output="x"), service.delete("nope", 1)):
        with pytest.raises(ProjectNotFound):
            await call


async def test_logs_hold_no_text(project: ProjectRecord, service: EpisodicMemoryService) -> None:
    """Adding logs ids and the output's length, not the instruction, output or document id."""
    with capture_logs() as logs:
        await service.add(project.id, instruction="写凶手", output="林远是凶手", document_id="秘密.md")
    assert "凶手" not in repr(logs)
    assert "秘密" not in repr(logs)
    assert logs[-1]["chars"] == 5
