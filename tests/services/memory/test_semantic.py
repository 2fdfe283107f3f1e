"""SemanticMemoryService: learned rules, upserted by id or exact text, listed by confidence."""

from __future__ import annotations

import pytest

from services.errors import InvalidInput, ProjectNotFound, RecordNotFound, RecordVersionConflict
from services.memory import SemanticMemoryService
from services.projects import ProjectRecord
from services.store import Database


@pytest.fixture
def service(database: Database) -> SemanticMemoryService:
    return SemanticMemoryService(database)


async def test_upsert_by_text_creates_then_updates(project: ProjectRecord,
                                                   service: SemanticMemoryService) -> None:
    """A new text creates a rule with defaults; the same text again updates it, keeping the rest."""
    rule, created = await service.upsert(project.id, text="动作场景偏好短句", category="style")
    assert created
    assert (rule.confidence, rule.confirmed, rule.version) == (0.5, False, 1)
    again, created = await service.upsert(project.id, text="动作场景偏好短句", confidence=0.9)
    assert not created
    assert (again.id, again.category, again.confidence, again.version) == (rule.id, "style", 0.9, 2)


async def test_upsert_by_id_confirms_and_checks_version(project: ProjectRecord,
                                                        service: SemanticMemoryService) -> None:
    """With an id, only the given fields change; a stale version is a conflict."""
    rule, _ = await service.upsert(project.id, text="少用形容词")
    confirmed, created = await service.upsert(project.id, rule_id=rule.id, version=1, confirmed=True)
    assert (created, confirmed.confirmed, confirmed.text, confirmed.version) == (False, True, rule.text, 2)
    with pytest.raises(RecordVersionConflict) as raised:
        await service.upsert(project.id, rule_id=rule.id, version=1, confirmed=False)
    assert raised.value.fields == {"currentVersion": 2}


async def test_list_orders_by_confidence_and_filters_confirmed(project: ProjectRecord,
                                                               service: SemanticMemoryService) -> None:
    """Rules come most confident first; confirmedOnly leaves out unconfirmed ones."""
    low, _ = await service.upsert(project.id, text="a", confidence=0.2, confirmed=True)
    high, _ = await service.upsert(project.id, text="b", confidence=0.95)
    mid, _ = await service.upsert(project.id, text="c", confidence=0.6, confirmed=True)
    assert [r.id for r in await service.list(project.id)] == [high.id, mid.id, low.id]
    assert [r.id for r in await service.list(project.id, confirmed_only=True)] == [mid.id, low.id]


async def test_another_projects_rule_is_not_found(project: ProjectRecord, other_project: ProjectRecord,
                                                  service: SemanticMemoryService) -> None:
    """Upsert or delete by another project's rule id is RECORD_NOT_FOUND; the same text is separate."""
    theirs, _ = await service.upsert(other_project.id, text="短句")
    with pytest.raises(RecordNotFound):
        await service.upsert(project.id, rule_id=theirs.id, confirmed=True)
    with pytest.raises(RecordNotFound):
        await service.delete(project.id, theirs.id)
    _, created = await service.upsert(project.id, text="短句")
    assert created
    assert await service.list(other_project.id) == [theirs]


async def test_delete(project: ProjectRecord, service: SemanticMemoryService) -> None:
    """A deleted rule is gone; deleting it again is RECORD_NOT_FOUND."""
    rule, _ = await service.upsert(project.id, text="x")
    await service.delete(project.id, rule.id)
    assert await service.list(project.id) == []
    with pytest.raises(RecordNotFound):
        await service.delete(project.id, rule.id)


@pytest.mark.parametrize("fields", [
    {"category": "style"}, {"text": "x", "confidence": 1.5}, {"text": "x", "confidence": -0.1},
    {"text": "x", "confidence": float("nan")}, {"text": " "}, {"text": "x" * 2001},
    {"text": "x", "version": 1}, {"text": "x", "category": "c" * 51},
])
async def test_invalid_rules_are_refused(fields: dict[str, object], project: ProjectRecord,
                                         service: SemanticMemoryService) -> None:
    """No text without an id, confidence outside 0..1, blank or long text are INVALID_PARAMS."""
    with pytest.raises(InvalidInput):
        await service.upsert(project.id, **fields)  # type: ignore[arg-type]
    assert await service.list(project.id) == []


async def test_unknown_project(service: SemanticMemoryService) -> None:
    """Every method on a project that does not exist is PROJECT_NOT_FOUND."""
    for call in (service.list("nope"), service.upsert("nope", text="x"), service.delete("nope", 1)):
        with pytest.raises(ProjectNotFound):
            await call
