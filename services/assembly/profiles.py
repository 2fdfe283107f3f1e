"""Budget profiles per project, with optimistic locking on ``version``."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from services.context.budget import validate_profile
from services.context.models import LAYER_ORDER, BudgetProfile
from services.errors import BudgetConflict, ProjectNotFound
from services.store import Database
from services.store.tables import BudgetProfileRow, ProjectRow

_RATIO_FIELDS = tuple(f"{layer.value}_ratio" for layer in LAYER_ORDER)
_MIN_FIELDS = tuple(f"{layer.value}_min" for layer in LAYER_ORDER)
_TABLE = "budget_profiles"


def to_profile(row: BudgetProfileRow) -> BudgetProfile:
    return BudgetProfile(
        context_window=row.context_window, output_reserve=row.output_reserve,
        ratios=tuple(getattr(row, f) for f in _RATIO_FIELDS),
        minimums=tuple(getattr(row, f) for f in _MIN_FIELDS),
        version=row.version,
    )


def _columns(profile: BudgetProfile) -> dict[str, Any]:
    values: dict[str, Any] = {"context_window": profile.context_window,
                              "output_reserve": profile.output_reserve}
    values |= dict(zip(_RATIO_FIELDS, profile.ratios, strict=True))
    values |= dict(zip(_MIN_FIELDS, profile.minimums, strict=True))
    return values


class BudgetProfiles:
    def __init__(self, database: Database) -> None:
        self._db = database
        self._snapshots = database.snapshots

    async def get(self, project_id: str) -> BudgetProfile:
        """The project's profile (the default, stored, on first use); kept until the next update."""
        return await self._snapshots.read(_TABLE, project_id, None, lambda: self._get(project_id))

    async def update(self, project_id: str, version: int, profile: BudgetProfile) -> BudgetProfile:
        """Store ``profile`` if the stored version is still ``version``; return it at version + 1."""
        validate_profile(profile)
        return await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                       lambda: self._update(project_id, version, profile))

    def _row(self, session: Session, project_id: str) -> BudgetProfileRow:
        row = session.get(BudgetProfileRow, project_id)
        if row is not None:
            return row
        if session.get(ProjectRow, project_id) is None:
            raise ProjectNotFound()
        row = BudgetProfileRow(project_id=project_id)
        session.add(row)
        try:
            session.commit()
        except IntegrityError:
            # A concurrent first use created it (or the project went away) since the read above.
            session.rollback()
            existing = session.get(BudgetProfileRow, project_id)
            if existing is None:
                raise ProjectNotFound() from None
            return existing
        session.refresh(row)
        return row

    def _get(self, project_id: str) -> BudgetProfile:
        with self._db.session() as session:
            return to_profile(self._row(session, project_id))

    def _update(self, project_id: str, version: int, profile: BudgetProfile) -> BudgetProfile:
        with self._db.session() as session:
            self._row(session, project_id)
            # Compare-and-set in one statement: of two writers with the same version, one wins.
            statement = (update(BudgetProfileRow)
                         .where(col(BudgetProfileRow.project_id) == project_id)
                         .where(col(BudgetProfileRow.version) == version)
                         .values(**_columns(profile), version=version + 1))
            changed = session.execute(statement).rowcount  # type: ignore[attr-defined]
            session.commit()
            current = session.exec(select(BudgetProfileRow).where(
                BudgetProfileRow.project_id == project_id)).one()
            session.refresh(current)
        if changed != 1:
            raise BudgetConflict(currentVersion=current.version)
        return to_profile(current)
