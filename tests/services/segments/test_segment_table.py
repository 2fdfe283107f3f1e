"""The segment table: added by schema 5, ids never reused."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import inspect, text

from services.projects import ProjectRecord
from services.segments import SegmentService
from services.store import Database
from services.store.database import open_database
from services.store.precheck import SCHEMA_VERSION


def test_a_version_4_database_gains_the_segment_table(tmp_path: Path) -> None:
    """Opening a database of schema 4 migrates it: step 5 adds the segment table."""
    url = f"sqlite:///{tmp_path / 'strata.db'}"
    first = open_database(url)
    with first.engine.begin() as conn:
        conn.execute(text("DROP TABLE segment"))
        conn.execute(text("UPDATE strata_meta SET value = '4' WHERE key = 'schema_version'"))
    first.close()
    again = open_database(url)
    try:
        assert again.schema_version == SCHEMA_VERSION >= 5
        columns = {c["name"] for c in inspect(again.engine).get_columns("segment")}
        assert columns == {"id", "project_id", "scope", "ref_id", "content", "tier", "type", "priority",
                           "active", "locale", "version", "created_at", "updated_at"}
    finally:
        again.close()


async def test_ids_of_deleted_segments_are_never_reused(database: Database, project: ProjectRecord) -> None:
    """After the newest segment is deleted, the next one gets a new id, so an exported file that
    names the deleted id cannot replace another segment."""
    service = SegmentService(database)
    first = await service.upsert(project.id, {"scope": "core", "content": "a"})
    await service.delete(project.id, first.id)
    second = await service.upsert(project.id, {"scope": "core", "content": "b"})
    assert second.id > first.id
