"""Reading summaries as stored: one per (project, level, unit), with the hash it was made for."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from sqlmodel import col, delete, select

from services.projects.scope import require_project
from services.reading.summary import Level
from services.reading.units import Stored, Unit
from services.store.database import Database
from services.store.tables import ReadingSummaryRow, utcnow


class SummaryStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def all(self, project_id: str) -> dict[Level, dict[str, Stored]]:
        """Every stored summary of the project, by level and unit name."""
        return await asyncio.to_thread(self._all, project_id)

    async def put(self, project_id: str, unit: Unit, rendered: str, tokens: int, source: str) -> None:
        await asyncio.to_thread(self._put, project_id, unit, rendered, tokens, source)

    async def forget(self, project_id: str, level: Level, names: Mapping[str, object] | None = None) -> int:
        """Delete the level's summaries (those named, or all); how many went."""
        return await asyncio.to_thread(self._forget, project_id, level, names)

    def _all(self, project_id: str) -> dict[Level, dict[str, Stored]]:
        found: dict[Level, dict[str, Stored]] = {"paragraph": {}, "page": {}, "chapter": {}}
        with self._db.session() as session:
            require_project(session, project_id)
            rows = session.exec(select(ReadingSummaryRow).where(
                col(ReadingSummaryRow.project_id) == project_id)).all()
            for row in rows:
                if row.level in found:
                    found[row.level][row.unit] = Stored(row.unit_hash, row.summary)
        return found

    def _put(self, project_id: str, unit: Unit, rendered: str, tokens: int, source: str) -> None:
        with self._db.session() as session:
            require_project(session, project_id)
            session.merge(ReadingSummaryRow(
                project_id=project_id, level=unit.level, unit=unit.name, unit_hash=unit.hash,
                summary=rendered, tokens=tokens, source=source, updated_at=utcnow()))
            session.commit()

    def _forget(self, project_id: str, level: Level, names: Mapping[str, object] | None) -> int:
        with self._db.session() as session:
            query = delete(ReadingSummaryRow).where(col(ReadingSummaryRow.project_id) == project_id,
                                                    col(ReadingSummaryRow.level) == level)
            if names is not None:
                query = query.where(col(ReadingSummaryRow.unit).in_(list(names)))
            gone = session.exec(query).rowcount
            session.commit()
            return int(gone or 0)
