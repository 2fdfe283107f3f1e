"""A project's prompt segments: list, upsert, delete, import and export.

At most :data:`MAX_SEGMENTS` per project: a create checks it in its own insert
(``INSERT ... SELECT ... WHERE count < limit``), an import counts after its
inserts, inside its transaction, and rolls back past it. Updates and deletes
by id take an optional version and apply only at it (compare-and-set in one
statement). An import is all-or-nothing: every entry is checked first, and
one transaction writes them all.

The project's active segments are read once and kept, grouped by (scope,
refId), in ``database.snapshots`` until the next write to its segments, so an
assembly's read opens no database session.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from sqlalchemy import delete, func
from sqlmodel import Session, col, select

from services.errors import InvalidInput, ProjectNotFound
from services.projects.scope import (
    count_in_project,
    explain_missed_update,
    insert_where,
    load_scoped,
    require_project,
    scoped,
    table_of,
    update_where,
)
from services.segments.active import ActiveSegments, list_order
from services.segments.records import (
    MAX_SEGMENTS,
    SCOPES,
    ImportEntry,
    SegmentInput,
    SegmentRecord,
    document,
)
from services.segments.validation import (
    REF_ID_NEEDED,
    check_import,
    needs_ref_id,
    refused,
    segment_input,
)
from services.store.database import Database
from services.store.tables import ProjectRow, SegmentRow

_log = structlog.get_logger("segments")
_TABLE = "segments"
_ACTIVE = "active"  # the one kept read of a project's segments

# (``list`` names a method inside the class.)
Records = list[SegmentRecord]
Entries = list[ImportEntry]
Documents = list[dict[str, Any]]


def _limit_reached(limit: int) -> InvalidInput:
    return InvalidInput(f"A project holds at most {limit} segments", limit=limit)


class SegmentService:
    """A project's stored prompt segments (the game-master profile's scopes)."""

    def __init__(self, database: Database, *, limit: int = MAX_SEGMENTS) -> None:
        self._db = database
        self._limit = limit
        self._snapshots = database.snapshots

    async def active(self, project_id: str) -> ActiveSegments:
        """The project's active segments by (scope, refId); kept until the next write."""
        return await self._snapshots.read(_TABLE, project_id, _ACTIVE,
                                          lambda: self._load_active(project_id))

    async def list(self, project_id: str, *, scope: str | None = None, ref_id: str | None = None,
                   active_only: bool = False) -> Records:
        """The segments (of ``scope``, of ``ref_id``, active only) by scope in prompt order, then
        refId (none first), tier and id. Active ones come from the kept read."""
        if scope is not None and scope not in SCOPES:
            raise InvalidInput(errors=[{"loc": ["scope"], "type": "literal_error",
                                        "msg": "must be one of " + ", ".join(SCOPES)}])
        if active_only:
            return (await self.active(project_id)).listed(scope, ref_id)
        return await asyncio.to_thread(self._list, project_id, scope, ref_id)

    async def upsert(self, project_id: str, segment: SegmentInput | Mapping[str, Any],
                     version: int | None = None) -> SegmentRecord:
        """Create the segment (no ``id``), or update segment ``id`` (at ``version``, if given)
        changing only the fields it gives."""
        checked = segment_input(segment)
        if version is not None and checked.id is None:
            raise InvalidInput(errors=[{"loc": ["version"], "type": "value_error",
                                        "msg": "applies only to an update by id"}])
        record = await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                         lambda: self._upsert(project_id, checked, version))
        _log.info("segment.upserted", project_id=project_id, id=record.id, scope=record.scope,
                  version=record.version, chars=len(record.content))
        return record

    async def delete(self, project_id: str, segment_id: int, version: int | None = None) -> None:
        """Delete the segment (only at ``version``, if given)."""
        await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                lambda: self._delete(project_id, segment_id, version))
        _log.info("segment.deleted", project_id=project_id, id=segment_id)

    async def import_(self, project_id: str, segments: Sequence[Any]) -> Records:
        """Write every entry or none: an entry with the id of a segment of the project replaces
        it, any other is created. Every problem of every entry is reported at once
        (INVALID_PARAMS with ``problems``: ``[{index, field, message}]``). Returns the segments
        in the order of the entries."""
        if isinstance(segments, str | bytes) or not isinstance(segments, Sequence):
            raise InvalidInput(errors=[{"loc": ["segments"], "type": "list_type",
                                        "msg": "must be an array of segments"}])
        if len(segments) > self._limit:
            raise _limit_reached(self._limit)
        entries, problems = await asyncio.to_thread(check_import, segments)
        if problems:
            raise refused(problems)
        records = await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                          lambda: self._import(project_id, entries))
        _log.info("segment.imported", project_id=project_id, segments=len(records))
        return records

    async def export(self, project_id: str) -> Documents:
        """Every segment of the project as a JSON array (listing order) that
        :meth:`import_` takes back: into another project it creates the same segments."""
        records = await asyncio.to_thread(self._list, project_id, None, None)
        return [document(record) for record in records]

    # --- in a worker thread -------------------------------------------------------------------

    def _load_active(self, project_id: str) -> ActiveSegments:
        with self._db.session() as session:
            require_project(session, project_id)
            rows = session.exec(select(SegmentRow).where(col(SegmentRow.project_id) == project_id,
                                                         col(SegmentRow.active).is_(True)))
            return ActiveSegments.of(SegmentRecord.model_validate(row) for row in rows)

    def _list(self, project_id: str, scope: str | None, ref_id: str | None) -> Records:
        with self._db.session() as session:
            require_project(session, project_id)
            return self._read(session, project_id, scope, ref_id)

    @staticmethod
    def _read(session: Session, project_id: str, scope: str | None = None,
              ref_id: str | None = None) -> Records:
        query = select(SegmentRow).where(col(SegmentRow.project_id) == project_id)
        if scope is not None:
            query = query.where(col(SegmentRow.scope) == scope)
        if ref_id is not None:
            query = query.where(col(SegmentRow.ref_id) == ref_id)
        return sorted((SegmentRecord.model_validate(row) for row in session.exec(query)), key=list_order)

    def _upsert(self, project_id: str, segment: SegmentInput, version: int | None) -> SegmentRecord:
        with self._db.session() as session:
            require_project(session, project_id)
            if segment.id is None:
                segment_id = self._create(session, project_id, segment)
            else:
                segment_id = self._update(session, project_id, segment, version)
            record = SegmentRecord.model_validate(load_scoped(session, SegmentRow, project_id, segment_id))
            if needs_ref_id(record.scope, record.ref_id):  # an update left a scope without its refId
                raise InvalidInput(errors=[{"loc": ["segment", "refId"], "type": "missing",
                                            "msg": REF_ID_NEEDED}])
            session.commit()
            return record

    def _create(self, session: Session, project_id: str, segment: SegmentInput) -> int:
        metadata = segment.metadata
        assert segment.scope is not None  # segment_input requires scope and content to create
        assert segment.content is not None
        row = SegmentRow(project_id=project_id, scope=segment.scope, ref_id=segment.ref_id,
                         content=segment.content, tier=metadata.tier, type=metadata.type,
                         priority=metadata.priority, active=segment.active, locale=segment.locale)
        new_id = insert_where(session, row, count_in_project(SegmentRow, project_id) < self._limit)
        if new_id is None:
            raise _limit_reached(self._limit)
        return new_id

    @staticmethod
    def _update(session: Session, project_id: str, segment: SegmentInput, version: int | None) -> int:
        assert segment.id is not None  # an update names its segment
        given = segment.model_fields_set
        changes: dict[str, Any] = {name: getattr(segment, name)
                                   for name in ("scope", "ref_id", "content", "active", "locale")
                                   if name in given}
        if "metadata" in given:
            changes |= {name: getattr(segment.metadata, name) for name in segment.metadata.model_fields_set}
        for name in ("scope", "content"):
            if name in changes and changes[name] is None:
                raise InvalidInput(errors=[{"loc": ["segment", name], "type": "value_error",
                                            "msg": "cannot be null"}])
        if update_where(session, SegmentRow, changes,
                        *scoped(SegmentRow, project_id, segment.id, version)) is None:
            explain_missed_update(session, SegmentRow, project_id, segment.id, version)
        return segment.id

    def _delete(self, project_id: str, segment_id: int, version: int | None) -> None:
        with self._db.session() as session:
            require_project(session, project_id)
            conditions = scoped(SegmentRow, project_id, segment_id, version)
            statement = delete(table_of(SegmentRow)).where(*conditions)
            if session.exec(statement).rowcount == 0:
                explain_missed_update(session, SegmentRow, project_id, segment_id, version)
            session.commit()

    def _import(self, project_id: str, entries: Entries) -> Records:
        with self._db.session() as session:
            _lock_project(session, project_id)
            ids: builtins.list[int | None] = []
            created: builtins.list[SegmentRow] = []
            for entry in entries:
                values = entry.values()
                if entry.id is not None and update_where(
                        session, SegmentRow, values, *scoped(SegmentRow, project_id, entry.id)) is not None:
                    ids.append(entry.id)
                    continue
                ids.append(None)
                created.append(SegmentRow(project_id=project_id, **values))
            session.add_all(created)
            session.flush()
            count = session.exec(select(func.count()).select_from(SegmentRow)
                                 .where(col(SegmentRow.project_id) == project_id)).one()
            if count > self._limit:
                raise _limit_reached(self._limit)  # nothing is committed
            new_ids = iter(row.id for row in created)
            ordered = [segment_id if segment_id is not None else next(new_ids) for segment_id in ids]
            by_id = {record.id: record for record in self._read(session, project_id)}
            session.commit()
            return [by_id[segment_id] for segment_id in ordered if segment_id is not None]


def _lock_project(session: Session, project_id: str) -> None:
    """Check the project exists, holding its row until the transaction ends where the database
    can, so two imports into one project count their segments one after the other. (SQLite
    has no row locks; its writes are serialized by the first write statement.)"""
    statement = select(ProjectRow.id).where(col(ProjectRow.id) == project_id).with_for_update()
    if session.exec(statement).first() is None:
        raise ProjectNotFound()
