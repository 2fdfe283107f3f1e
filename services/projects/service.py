"""Projects: a folder of the writer's documents, registered under a stable id."""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from services.errors import ProjectPathForbidden, ProjectPathInvalid
from services.projects.inputs import validated
from services.projects.records import ProjectRecord, SettingsRecord
from services.projects.roots import FolderPolicy
from services.projects.scope import require_project
from services.projects.settings import MAX_PATH, SettingsPatch, compare_and_set, load_settings
from services.store.database import Database
from services.store.tables import BudgetProfileRow, ProjectRow, ProjectSettingsRow

MAX_NAME = 200

_log = structlog.get_logger("projects")


def project_id_for(real_path: str) -> str:
    """The first 16 hex chars of SHA-256 of the folder's real path: same folder, same id."""
    return hashlib.sha256(os.fsencode(real_path)).hexdigest()[:16]


def resolve_folder(path: str, policy: FolderPolicy | None = None) -> str:
    """The real path of an existing readable folder, or ProjectPathInvalid (path not echoed).

    A folder ``policy`` refuses is ProjectPathForbidden, whether it exists or not, so that
    the error tells nothing about what is in places a project cannot be.
    """
    if not path or len(path) > MAX_PATH or not os.path.isabs(path):
        raise ProjectPathInvalid()
    try:
        real = os.path.realpath(path)
        os.fsencode(real)  # a path the file system cannot name (lone surrogates) is no folder
    except (OSError, ValueError):
        raise ProjectPathInvalid() from None
    if policy is not None:
        policy.check(path, real)
    try:
        usable = os.path.isdir(real) and os.access(real, os.R_OK | os.X_OK)
    except (OSError, ValueError):
        raise ProjectPathInvalid() from None
    if not usable:
        raise ProjectPathInvalid()
    return real


def clean_name(name: str | None, real_path: str) -> str:
    """The name to show: the one given, else the folder's own name."""
    chosen = (name or "").strip() or os.path.basename(real_path) or real_path
    return chosen[:MAX_NAME]


_SETTINGS = "project_settings"  # the kept-reads table name of the settings

class ProjectService:
    """Registers folders as projects and keeps their settings."""

    def __init__(self, database: Database, on_open: Callable[[str, Path], None] | None = None,
                 policy: FolderPolicy | None = None) -> None:
        self._db = database
        self.on_open = on_open  # told of every opened project (e.g. so retrieval indexes and watches it)
        # Where a project may be; without one, this machine's rules with no data dir or allow-list.
        self.policy = policy or FolderPolicy.for_this_machine()

    async def open(self, path: str, name: str | None = None) -> ProjectRecord:
        """Register the folder at ``path`` (or find it again); rename it if ``name`` is given."""
        record = await asyncio.to_thread(self._open, path, name)
        if self.on_open is not None:
            self.on_open(record.id, Path(record.path))
        return record

    async def list(self) -> list[ProjectRecord]:
        return await asyncio.to_thread(self._list)

    async def get(self, project_id: str) -> ProjectRecord:
        """The project, or ProjectNotFound."""
        return await asyncio.to_thread(self._get, project_id)

    async def get_settings(self, project_id: str) -> SettingsRecord:
        """The project's settings, kept until the next update (every assembly reads them)."""
        return await self._db.snapshots.read(_SETTINGS, project_id, None,
                                             lambda: self._read_settings(project_id))

    async def update_settings(self, project_id: str, version: int, **fields: Any) -> SettingsRecord:
        """Change the given settings if they are still at ``version``; the new settings.

        RecordVersionConflict (with ``currentVersion``) if someone else updated first.
        """
        patch = validated(SettingsPatch, fields)
        record = await asyncio.to_thread(self._db.snapshots.write, _SETTINGS, project_id,
                                         lambda: self._update_settings(project_id, version, patch))
        _log.info("project.settings_updated", project_id=project_id, version=record.version,
                  fields=sorted(patch.model_fields_set))
        return record

    def _open(self, path: str, name: str | None) -> ProjectRecord:
        try:
            real = resolve_folder(path, self.policy)
        except ProjectPathForbidden as exc:
            _log.info("project.open_refused", reason=exc.fields.get("reason"))
            raise
        project_id = project_id_for(real)
        with self._db.session() as session:
            row = session.get(ProjectRow, project_id)
            created = row is None
            if row is None:
                row = self._create(session, project_id, real, clean_name(name, real))
            elif name is not None and name.strip():
                row.name = clean_name(name, real)
                session.add(row)
                session.commit()
            record = ProjectRecord.model_validate(row)
        _log.info("project.opened", project_id=project_id, created=created)
        return record

    def _create(self, session: Session, project_id: str, real: str, name: str) -> ProjectRow:
        """The project with default settings and budget, in one transaction."""
        try:
            session.add(ProjectRow(id=project_id, path=real, name=name))
            session.flush()  # the unit of work does not order rows by foreign key
            session.add_all([ProjectSettingsRow(project_id=project_id),
                             BudgetProfileRow(project_id=project_id)])
            session.commit()
        except IntegrityError:
            session.rollback()
            if session.get(ProjectRow, project_id) is None:
                raise
            # opened concurrently: the other open made all three rows
        return require_project(session, project_id)

    def _list(self) -> builtins.list[ProjectRecord]:
        with self._db.session() as session:
            rows = session.exec(select(ProjectRow).order_by(col(ProjectRow.name), col(ProjectRow.id)))
            return [ProjectRecord.model_validate(row) for row in rows]

    def _get(self, project_id: str) -> ProjectRecord:
        with self._db.session() as session:
            return ProjectRecord.model_validate(require_project(session, project_id))

    def _read_settings(self, project_id: str) -> SettingsRecord:
        with self._db.session() as session:
            return load_settings(session, project_id)

    def _update_settings(self, project_id: str, version: int, patch: SettingsPatch) -> SettingsRecord:
        with self._db.session() as session:
            return compare_and_set(session, project_id, version, patch)
