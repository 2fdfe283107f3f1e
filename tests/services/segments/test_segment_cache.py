"""The kept read of a project's active segments: grouped by (scope, refId), read once, forgotten
at every write."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from services.errors import InvalidInput
from services.projects import ProjectRecord
from services.segments import SegmentService
from services.store import Database


@pytest.fixture
def service(database: Database) -> SegmentService:
    return SegmentService(database)


class SessionCounter:
    """Counts the sessions a database opens (and can forbid them)."""

    def __init__(self, database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened = 0
        self.forbidden = False
        real = database.session

        def session() -> Session:
            if self.forbidden:
                raise AssertionError("a warm read opened a database session")
            self.opened += 1
            return real()

        monkeypatch.setattr(database, "session", session)


@pytest.fixture
def sessions(database: Database, monkeypatch: pytest.MonkeyPatch) -> SessionCounter:
    return SessionCounter(database, monkeypatch)


async def test_active_segments_are_grouped_in_prompt_order(project: ProjectRecord,
                                                           service: SegmentService) -> None:
    """Active segments are grouped by (scope, refId) and by scope, each by tier then id;
    inactive ones are left out."""
    high = await service.upsert(project.id, {"scope": "npc", "refId": "npc.a", "content": "三",
                                             "metadata": {"tier": 2}})
    low = await service.upsert(project.id, {"scope": "npc", "refId": "npc.a", "content": "一"})
    await service.upsert(project.id, {"scope": "npc", "refId": "npc.a", "content": "off", "active": False})
    other = await service.upsert(project.id, {"scope": "npc", "refId": "npc.b", "content": "二",
                                              "metadata": {"tier": 1}})
    core = await service.upsert(project.id, {"scope": "core", "refId": "core.extra", "content": "核"})
    active = await service.active(project.id)
    assert active.group("npc", "npc.a") == (low, high)
    assert active.scope("npc") == (low, other, high)
    assert active.scope("core") == (core,)
    assert active.group("core", None) == ()
    assert active.group("world", "world.a") == ()
    assert len(active) == 4


async def test_a_warm_read_opens_no_session(project: ProjectRecord, service: SegmentService,
                                            sessions: SessionCounter) -> None:
    """After one read, reading the active segments again (and listing active ones) is answered
    from the kept read, without a database session, and is the very same object."""
    await service.upsert(project.id, {"scope": "core", "content": "你好"})
    first = await service.active(project.id)
    sessions.forbidden = True
    assert await service.active(project.id) is first
    assert [s.content for s in await service.list(project.id, active_only=True)] == ["你好"]


async def test_every_write_is_seen_by_the_next_read(database: Database, project: ProjectRecord,
                                                    service: SegmentService,
                                                    sessions: SessionCounter) -> None:
    """Create, update, delete and import each forget the kept read, even through another service
    object on the same database; the next read sees the write."""
    created = await service.upsert(project.id, {"scope": "core", "content": "一"})
    assert [s.content for s in (await service.active(project.id)).scope("core")] == ["一"]
    await service.upsert(project.id, {"id": created.id, "content": "二"})
    assert [s.content for s in (await service.active(project.id)).scope("core")] == ["二"]
    await service.upsert(project.id, {"id": created.id, "active": False})
    assert len(await service.active(project.id)) == 0
    await service.import_(project.id, [{"scope": "core", "content": "三"}])
    assert [s.content for s in (await service.active(project.id)).scope("core")] == ["三"]
    other = SegmentService(database)
    await other.delete(project.id, created.id)
    await other.upsert(project.id, {"scope": "core", "content": "四"})
    assert [s.content for s in (await service.active(project.id)).scope("core")] == ["三", "四"]
    before = sessions.opened
    await service.active(project.id)
    assert sessions.opened == before


async def test_a_refused_write_changes_nothing_kept(project: ProjectRecord, service: SegmentService) -> None:
    """A refused import leaves the next read with the same segments."""
    await service.upsert(project.id, {"scope": "core", "content": "kept"})
    before = await service.active(project.id)
    with pytest.raises(InvalidInput):
        await service.import_(project.id, [{"scope": "core", "content": "new"}, {"scope": "bad"}])
    assert (await service.active(project.id)).scope("core") == before.scope("core")


async def test_kept_reads_are_per_project(project: ProjectRecord, other_project: ProjectRecord,
                                          service: SegmentService) -> None:
    """Each project's kept read holds its own segments only, and a write to one project leaves
    the other's kept read in place."""
    await service.upsert(project.id, {"scope": "core", "content": "mine"})
    await service.upsert(other_project.id, {"scope": "core", "content": "theirs"})
    theirs = await service.active(other_project.id)
    assert [s.content for s in (await service.active(project.id)).scope("core")] == ["mine"]
    assert [s.content for s in theirs.scope("core")] == ["theirs"]
    await service.upsert(project.id, {"scope": "core", "content": "mine too"})
    assert await service.active(other_project.id) is theirs
