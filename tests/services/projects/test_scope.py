"""Project-scoped rows: existence checks and single-statement conditional writes."""

from __future__ import annotations

import asyncio

import pytest

from services.errors import ProjectNotFound, RecordNotFound, RecordVersionConflict
from services.projects import ProjectRecord
from services.projects.scope import (
    check_version,
    count_in_project,
    delete_scoped,
    explain_missed_update,
    insert_where,
    load_scoped,
    require_project,
    scoped,
    update_where,
)
from services.store import Database
from services.store.tables import ConstraintRow


def _insert(database: Database, project_id: str, limit: int = 10) -> int | None:
    with database.session() as session:
        row = ConstraintRow(project_id=project_id, kind="plot", text="t")
        new_id = insert_where(session, row, count_in_project(ConstraintRow, project_id) < limit)
        session.commit()
        return new_id


async def test_require_project(database: Database, project: ProjectRecord) -> None:
    """An existing project's row comes back; an unknown id is ProjectNotFound."""
    with database.session() as session:
        assert require_project(session, project.id).id == project.id
        with pytest.raises(ProjectNotFound):
            require_project(session, "nope")


async def test_insert_where_inserts_only_while_the_condition_holds(database: Database,
                                                                  project: ProjectRecord) -> None:
    """Under the limit the row is inserted with its new id; at the limit nothing is inserted."""
    ids = [_insert(database, project.id, limit=2) for _ in range(3)]
    assert ids[0] is not None
    assert ids[1] is not None
    assert ids[2] is None
    with database.session() as session:
        assert load_scoped(session, ConstraintRow, project.id, ids[0]).version == 1


async def test_insert_where_is_atomic_under_concurrent_writers(database: Database,
                                                              project: ProjectRecord) -> None:
    """Twenty inserts racing on real threads against a limit of 5 leave exactly 5 rows."""
    results = await asyncio.gather(*(asyncio.to_thread(_insert, database, project.id, 5)
                                     for _ in range(20)))
    assert sum(r is not None for r in results) == 5


async def test_update_where_bumps_version_only_at_the_named_version(
        database: Database, project: ProjectRecord) -> None:
    """A scoped update at the current version applies and bumps it; at an old one it matches nothing."""
    row_id = _insert(database, project.id)
    assert row_id is not None
    with database.session() as session:
        assert update_where(session, ConstraintRow, {"text": "u"},
                            *scoped(ConstraintRow, project.id, row_id, 1)) == row_id
        assert update_where(session, ConstraintRow, {"text": "v"},
                            *scoped(ConstraintRow, project.id, row_id, 1)) is None
        row = load_scoped(session, ConstraintRow, project.id, row_id)
        assert (row.text, row.version) == ("u", 2)
        assert row.updated_at >= row.created_at


async def test_other_projects_records_are_not_found(database: Database, project: ProjectRecord,
                                                    other_project: ProjectRecord) -> None:
    """Loading, updating, explaining or deleting another project's record is RecordNotFound."""
    row_id = _insert(database, other_project.id)
    assert row_id is not None
    with database.session() as session:
        with pytest.raises(RecordNotFound):
            load_scoped(session, ConstraintRow, project.id, row_id)
        assert update_where(session, ConstraintRow, {"text": "x"},
                            *scoped(ConstraintRow, project.id, row_id)) is None
        with pytest.raises(RecordNotFound):
            explain_missed_update(session, ConstraintRow, project.id, row_id, None)
        with pytest.raises(RecordNotFound):
            delete_scoped(session, ConstraintRow, project.id, row_id)
        assert load_scoped(session, ConstraintRow, other_project.id, row_id).text == "t"


async def test_check_version_explains_a_missed_update(database: Database,
                                                      project: ProjectRecord) -> None:
    """A version mismatch is RecordVersionConflict with currentVersion; a match returns the row."""
    row_id = _insert(database, project.id)
    assert row_id is not None
    with database.session() as session:
        with pytest.raises(RecordVersionConflict) as raised:
            check_version(session, ConstraintRow, project.id, row_id, 7)
        assert raised.value.fields == {"currentVersion": 1}
        assert check_version(session, ConstraintRow, project.id, row_id, 1).id == row_id
        assert check_version(session, ConstraintRow, project.id, row_id, None).id == row_id
        with pytest.raises(RecordNotFound):
            check_version(session, ConstraintRow, project.id, row_id + 1, None)
