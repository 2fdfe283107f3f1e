"""Knowledge-graph entities of a project: characters, places, objects, groups, concepts.

An entity is identified by its id, or else by (kind, name) within the
project, which stays unique: the insert only happens if no entity of that
kind has that name, and a rename by id only happens if the new name is free,
each decided by one SQL statement.
"""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

import structlog
from sqlalchemy import ColumnElement, exists
from sqlmodel import Session, col, select

from services.errors import RecordNotFound
from services.knowledge.records import Aliases, Description, EntityKind, EntityName, KgEntityRecord
from services.projects.inputs import Input, invalid, validated
from services.projects.scope import (
    check_version,
    delete_scoped,
    insert_where,
    load_scoped,
    require_project,
    scoped,
    table_of,
    update_where,
)
from services.store.database import Database
from services.store.tables import KgEntityRow

_log = structlog.get_logger("knowledge")
_TABLE = "kg_entities"


class EntityDraft(Input):
    kind: EntityKind
    name: EntityName
    aliases: Aliases | None = None  # None keeps the current aliases (none for a new entity)
    description: Description | None = None


def named(project_id: str, kind: str, name: str, *, other_than: int | None = None) -> ColumnElement[bool]:
    """True while the project has an entity of ``kind`` called ``name`` (other than one id)."""
    other = table_of(KgEntityRow).alias("other")
    conditions = [other.c.project_id == project_id, other.c.kind == kind, other.c.name == name]
    if other_than is not None:
        conditions.append(other.c.id != other_than)
    return exists().where(*conditions)


class KgService:
    """List, upsert and delete a project's knowledge-graph entities."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._snapshots = database.snapshots

    async def list(self, project_id: str, kind: EntityKind | None = None) -> list[KgEntityRecord]:
        """The project's entities (of one kind, if given), by kind then name.

        Read once and then kept until the next write to the project's entities.
        """
        return list(await self._snapshots.read(_TABLE, project_id, kind,
                                               lambda: self._list(project_id, kind)))

    async def upsert(self, project_id: str, *, kind: EntityKind, name: str,
                     aliases: builtins.list[str] | None = None, description: str | None = None,
                     entity_id: int | None = None,
                     version: int | None = None) -> tuple[KgEntityRecord, bool]:
        """Update entity ``entity_id`` or else the one named ``name`` of ``kind``, or create it.

        Returns the entity and whether it was created. ``version`` (with an id)
        makes the update conditional: RecordVersionConflict if it moved on.
        """
        draft = validated(EntityDraft, {"kind": kind, "name": name, "aliases": aliases,
                                        "description": description})
        if version is not None and entity_id is None:
            raise invalid("version", "applies only to an update by id")
        record, created = await asyncio.to_thread(
            self._snapshots.write, _TABLE, project_id,
            lambda: self._upsert(project_id, draft, entity_id, version))
        _log.info("kg.entity_upserted", project_id=project_id, id=record.id, kind=record.kind,
                  created=created, version=record.version)
        return record, created

    async def delete(self, project_id: str, entity_id: int) -> None:
        await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                lambda: self._delete(project_id, entity_id))
        _log.info("kg.entity_deleted", project_id=project_id, id=entity_id)

    def _list(self, project_id: str, kind: str | None) -> tuple[KgEntityRecord, ...]:
        with self._db.session() as session:
            require_project(session, project_id)
            query = select(KgEntityRow).where(KgEntityRow.project_id == project_id)
            if kind is not None:
                query = query.where(KgEntityRow.kind == kind)
            rows = session.exec(query.order_by(col(KgEntityRow.kind), col(KgEntityRow.name),
                                               col(KgEntityRow.id)))
            return tuple(KgEntityRecord.model_validate(row) for row in rows)

    def _upsert(self, project_id: str, draft: EntityDraft, entity_id: int | None,
                version: int | None) -> tuple[KgEntityRecord, bool]:
        with self._db.session() as session:
            require_project(session, project_id)
            if entity_id is not None:
                found, created = self._update_by_id(session, project_id, draft, entity_id, version), False
            else:
                found, created = self._upsert_by_name(session, project_id, draft)
            record = KgEntityRecord.model_validate(load_scoped(session, KgEntityRow, project_id, found))
            session.commit()
            return record, created

    @staticmethod
    def _update_by_id(session: Session, project_id: str, draft: EntityDraft, entity_id: int,
                      version: int | None) -> int:
        conditions = scoped(KgEntityRow, project_id, entity_id, version)
        free = ~named(project_id, draft.kind, draft.name, other_than=entity_id)
        if update_where(session, KgEntityRow, draft.model_dump(exclude_none=True),
                        *conditions, free) is None:
            check_version(session, KgEntityRow, project_id, entity_id, version)
            raise invalid("name", "another entity of this kind has this name")
        return entity_id

    @staticmethod
    def _upsert_by_name(session: Session, project_id: str, draft: EntityDraft) -> tuple[int, bool]:
        table = table_of(KgEntityRow)
        changes: dict[str, Any] = draft.model_dump(exclude_none=True)
        for _attempt in range(2):  # a concurrent delete between the two statements: try again
            row = KgEntityRow(project_id=project_id, **changes)
            new_id = insert_where(session, row, ~named(project_id, draft.kind, draft.name))
            if new_id is not None:
                return new_id, True
            updated = update_where(session, KgEntityRow, changes, table.c.project_id == project_id,
                                   table.c.kind == draft.kind, table.c.name == draft.name)
            if updated is not None:
                return int(updated), False
        raise RecordNotFound()

    def _delete(self, project_id: str, entity_id: int) -> None:
        with self._db.session() as session:
            require_project(session, project_id)
            delete_scoped(session, KgEntityRow, project_id, entity_id)
            session.commit()
