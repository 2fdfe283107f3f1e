"""Rows scoped to a project: existence, and writes that are atomic in one SQL statement.

Every compare-and-set here is a single ``INSERT ... SELECT ... WHERE`` or
``UPDATE ... WHERE`` so that concurrent writers cannot both pass a check
made by an earlier ``SELECT``: the database decides, and the row count says
who won. A record of another project is "not found", never "forbidden", so
ids of other projects cannot be probed.
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar, cast

from sqlalchemy import ColumnElement, Table, delete, func, insert, literal, select, update
from sqlmodel import Session, SQLModel

from services.errors import ProjectNotFound, RecordNotFound, RecordVersionConflict
from services.store.tables import ProjectRow, utcnow

RowT = TypeVar("RowT", bound=SQLModel)


def table_of(model: type[SQLModel]) -> Table:
    return cast(Table, model.__table__)  # type: ignore[attr-defined]


def require_project(session: Session, project_id: str) -> ProjectRow:
    """The project's row, or ProjectNotFound."""
    row = session.get(ProjectRow, project_id)
    if row is None:
        raise ProjectNotFound()
    return row


def count_in_project(model: type[SQLModel], project_id: str) -> ColumnElement[int]:
    """A scalar subquery: how many rows of ``model`` the project has."""
    table = table_of(model)
    return (select(func.count()).select_from(table)
            .where(table.c.project_id == project_id).scalar_subquery())


def insert_where(session: Session, row: SQLModel, condition: ColumnElement[bool]) -> int | None:
    """Insert ``row`` only if ``condition`` holds, atomically; the new id, or None."""
    table = table_of(type(row))
    values = row.model_dump(exclude={"id"})
    selected = select(*(literal(value, table.c[name].type) for name, value in values.items()))
    statement = (insert(table).from_select(list(values), selected.where(condition))
                 .returning(table.c.id))
    return cast(int | None, session.exec(statement).scalar_one_or_none())


def update_where(session: Session, model: type[SQLModel], values: dict[str, Any],
                 *conditions: ColumnElement[bool]) -> Any | None:
    """Apply ``values`` and bump ``version`` where every condition holds, atomically.

    Returns the primary key of the row changed, or None when none matched.
    """
    table = table_of(model)
    changes = {**values, "version": table.c.version + 1}
    if "updated_at" in table.c:
        changes["updated_at"] = utcnow()
    key = next(iter(table.primary_key.columns))
    statement = update(table).where(*conditions).values(changes).returning(key)
    keys = session.exec(statement).scalars().all()
    return keys[0] if keys else None


def scoped(model: type[SQLModel], project_id: str, record_id: int,
           version: int | None = None) -> list[ColumnElement[bool]]:
    """Conditions selecting one record of one project, at ``version`` if given."""
    table = table_of(model)
    conditions = [table.c.id == record_id, table.c.project_id == project_id]
    if version is not None:
        conditions.append(table.c.version == version)
    return conditions


def load_scoped(session: Session, model: type[RowT], project_id: str, record_id: int) -> RowT:
    """The record as the database has it now, or RecordNotFound."""
    row = session.get(model, record_id, populate_existing=True)
    if row is None or getattr(row, "project_id", None) != project_id:
        raise RecordNotFound()
    return row


def check_version(session: Session, model: type[RowT], project_id: str, record_id: int,
                  version: int | None) -> RowT:
    """The record, if it exists in the project at ``version`` (any, if None).

    Called after a scoped update changed nothing, to say why: RecordNotFound
    or RecordVersionConflict with the version the caller should re-read.
    """
    row = load_scoped(session, model, project_id, record_id)
    current = cast(int, getattr(row, "version"))  # noqa: B009  (every versioned table has it)
    if version is not None and current != version:
        raise RecordVersionConflict(currentVersion=current)
    return row


def explain_missed_update(session: Session, model: type[SQLModel], project_id: str,
                          record_id: int, version: int | None) -> NoReturn:
    """Raise why a scoped update by id and version changed nothing."""
    check_version(session, model, project_id, record_id, version)
    raise RecordNotFound()  # it appeared only after the update looked: treat as absent then


def delete_scoped(session: Session, model: type[SQLModel], project_id: str, record_id: int) -> None:
    """Delete one record of the project, or RecordNotFound."""
    table = table_of(model)
    result = session.exec(delete(table).where(*scoped(model, project_id, record_id)))
    if result.rowcount == 0:
        raise RecordNotFound()
