"""Explicit writing constraints of a project: the Rules layer's own entries.

At most :data:`MAX_CONSTRAINTS` per project, enforced by the insert itself
(``INSERT ... SELECT ... WHERE count < limit``) so concurrent creates cannot
overshoot.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from sqlmodel import Session, col, select

from services.errors import ConstraintsLimit
from services.knowledge.records import (
    MAX_CONSTRAINTS,
    ConstraintKind,
    ConstraintRecord,
    ConstraintSource,
    ConstraintText,
    Priority,
)
from services.projects.inputs import Input, validated
from services.projects.scope import (
    count_in_project,
    delete_scoped,
    explain_missed_update,
    insert_where,
    load_scoped,
    require_project,
    scoped,
    update_where,
)
from services.store.database import Database
from services.store.tables import ConstraintRow

_log = structlog.get_logger("knowledge")
_TABLE = "constraints"


class ConstraintDraft(Input):
    kind: ConstraintKind
    text: ConstraintText
    source: ConstraintSource = "user"
    priority: Priority = 0


class ConstraintPatch(Input):
    """Fields to change; None keeps the current value."""

    kind: ConstraintKind | None = None
    text: ConstraintText | None = None
    source: ConstraintSource | None = None
    priority: Priority | None = None


class ConstraintService:
    """List, create, update and delete a project's constraints."""

    def __init__(self, database: Database, *, limit: int = MAX_CONSTRAINTS) -> None:
        self._db = database
        self._limit = limit
        self._snapshots = database.snapshots

    async def list(self, project_id: str) -> list[ConstraintRecord]:
        """Every constraint, most important first (priority descending, then oldest first).

        Read once and then kept until the next write to the project's constraints.
        """
        return list(await self._snapshots.read(_TABLE, project_id, None, lambda: self._list(project_id)))

    async def create(self, project_id: str, *, kind: ConstraintKind, text: str,
                     source: ConstraintSource = "user", priority: int = 0) -> ConstraintRecord:
        """A new constraint, or ConstraintsLimit when the project has the maximum."""
        draft = validated(ConstraintDraft, {"kind": kind, "text": text, "source": source,
                                            "priority": priority})
        record = await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                         lambda: self._create(project_id, draft))
        _log.info("constraint.created", project_id=project_id, id=record.id, kind=record.kind,
                  chars=len(record.text))
        return record

    async def update(self, project_id: str, constraint_id: int, *, version: int | None = None,
                     **fields: Any) -> ConstraintRecord:
        """Change the given fields (kind, text, source, priority), checking ``version`` if given."""
        patch = validated(ConstraintPatch, fields)
        record = await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                         lambda: self._update(project_id, constraint_id, version, patch))
        _log.info("constraint.updated", project_id=project_id, id=constraint_id,
                  version=record.version)
        return record

    async def delete(self, project_id: str, constraint_id: int) -> None:
        await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                lambda: self._delete(project_id, constraint_id))
        _log.info("constraint.deleted", project_id=project_id, id=constraint_id)

    def _list(self, project_id: str) -> tuple[ConstraintRecord, ...]:
        with self._db.session() as session:
            require_project(session, project_id)
            rows = session.exec(select(ConstraintRow).where(ConstraintRow.project_id == project_id)
                                .order_by(col(ConstraintRow.priority).desc(), col(ConstraintRow.id)))
            return tuple(ConstraintRecord.model_validate(row) for row in rows)

    def _create(self, project_id: str, draft: ConstraintDraft) -> ConstraintRecord:
        with self._db.session() as session:
            require_project(session, project_id)
            row = ConstraintRow(project_id=project_id, **draft.model_dump())
            new_id = insert_where(session, row,
                                  count_in_project(ConstraintRow, project_id) < self._limit)
            if new_id is None:
                raise ConstraintsLimit(limit=self._limit)
            return self._commit(session, project_id, new_id)

    def _update(self, project_id: str, constraint_id: int, version: int | None,
                patch: ConstraintPatch) -> ConstraintRecord:
        with self._db.session() as session:
            require_project(session, project_id)
            changes = patch.model_dump(exclude_none=True)
            conditions = scoped(ConstraintRow, project_id, constraint_id, version)
            if update_where(session, ConstraintRow, changes, *conditions) is None:
                explain_missed_update(session, ConstraintRow, project_id, constraint_id, version)
            return self._commit(session, project_id, constraint_id)

    def _delete(self, project_id: str, constraint_id: int) -> None:
        with self._db.session() as session:
            require_project(session, project_id)
            delete_scoped(session, ConstraintRow, project_id, constraint_id)
            session.commit()

    @staticmethod
    def _commit(session: Session, project_id: str, constraint_id: int) -> ConstraintRecord:
        record = ConstraintRecord.model_validate(
            load_scoped(session, ConstraintRow, project_id, constraint_id))
        session.commit()
        return record
