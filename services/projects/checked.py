"""The documents of projects whose folders the rules of :mod:`services.projects.roots` allow."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import structlog

from services.projects.documents import DocumentStore
from services.projects.records import DocumentInfo, DocumentListing
from services.projects.roots import FolderPolicy, forbidden
from services.store.database import Database

_log = structlog.get_logger("projects")

MAX_CLEARED = 10_000  # project ids remembered as allowed; forgotten all at once past this


class CheckedDocumentStore(DocumentStore):
    """The documents, refused in a project whose folder the policy forbids.

    ``project:open`` refuses such folders, but a project may have been
    registered before these rules, or with another allow-list, or by another
    server sharing the database: its folder is checked on first use in this
    run (and the project id then remembered, as a project's folder never
    changes: its id is derived from it). The project's records stay in the
    database and come back if the rules allow its folder again.
    """

    def __init__(self, database: Database, policy: FolderPolicy, **options: Any) -> None:
        super().__init__(database, **options)
        self.policy = policy
        self._cleared: set[str] = set()

    async def root(self, project_id: str) -> Path:
        root = await super().root(project_id)
        reason = self.policy.verdict(str(root), str(root))  # a stored path is real (project_root checks)
        if reason is not None:
            _log.warning("project.folder_forbidden", project_id=project_id, reason=reason)
            raise forbidden(reason)
        if len(self._cleared) >= MAX_CLEARED:
            self._cleared.clear()
        self._cleared.add(project_id)
        return root

    async def list(self, project_id: str) -> DocumentListing:
        await self._check(project_id)
        return await super().list(project_id)

    async def read(self, project_id: str, document_id: str) -> str:
        await self._check(project_id)
        return await super().read(project_id, document_id)

    async def heads(self, project_id: str, limit_bytes: int = 2048) -> builtins.list[tuple[str, str]]:
        await self._check(project_id)
        return await super().heads(project_id, limit_bytes)

    async def write(self, project_id: str, document_id: str, text: str) -> DocumentInfo:
        await self._check(project_id)
        return await super().write(project_id, document_id, text)

    async def _check(self, project_id: str) -> None:
        if project_id not in self._cleared:
            await self.root(project_id)
