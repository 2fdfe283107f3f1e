"""A project's own profiles in SQL: one row per (project, name), the document as JSON text, a version.

Each write is one statement that decides in the database: a create inserts
only while the project has fewer than :data:`MAX_PROFILES` profiles and none
of that name, an update or a delete applies only at the version named. When a
statement changes nothing, :func:`explain_create` or :func:`explain_change`
says why. These functions work in the caller's session and never commit: the
service checks the project's profiles after its write and commits only when
they all still resolve.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from sqlalchemy import delete, exists, func, insert, literal, update
from sqlalchemy import select as select_core
from sqlmodel import Session, col, select

from services.errors import InvalidInput, ProfileConflict, ProfileNotFound, ProjectNotFound
from services.projects.scope import table_of
from services.store.tables import ProfileRow, ProjectRow, utcnow

MAX_PROFILES = 64
MAX_DOCUMENT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class StoredProfile:
    """One stored profile as read; immutable, so a kept read can be shared."""

    name: str
    text: str  # the document as compact JSON
    version: int
    description: str | None = None
    extends: str | None = None

    @classmethod
    def of(cls, name: str, text: str, version: int = 0) -> StoredProfile:
        document = json.loads(text)
        description, extends = document.get("description"), document.get("extends")
        return cls(name=name, text=text, version=version,
                   description=description if isinstance(description, str) else None,
                   extends=extends if isinstance(extends, str) else None)

    def document(self) -> dict[str, Any]:
        """A fresh copy of the document (callers may change it)."""
        document: dict[str, Any] = json.loads(self.text)
        return document


def encode(document: Mapping[str, Any], max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """The document as compact JSON text, or INVALID_PARAMS when it is over ``max_bytes``."""
    try:
        text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        size = len(text.encode("utf-8"))  # a lone surrogate (legal in a JSON string) fails here
    except (TypeError, ValueError, RecursionError):
        raise InvalidInput("The profile must be a JSON document of valid Unicode text") from None
    if size > max_bytes:
        raise InvalidInput(f"A profile document holds at most {max_bytes // 1024} KiB of JSON",
                           limit=max_bytes, size=size)
    return text


def lock_project(session: Session, project_id: str) -> None:
    """Check the project exists, holding its row until the transaction ends where the database can.

    On servers this serializes the profile writes of one project, so a save and the check of
    the profiles that extend it see the same set. SQLite has no row locks (and SQLAlchemy drops
    FOR UPDATE there); its writes are serialized by the write statement that comes next.
    """
    statement = select(ProjectRow.id).where(col(ProjectRow.id) == project_id).with_for_update()
    if session.exec(statement).first() is None:
        raise ProjectNotFound()


def load(session: Session, project_id: str) -> dict[str, StoredProfile]:
    """Every profile of the project, by name, in name order."""
    rows = session.exec(select(ProfileRow.name, ProfileRow.document, ProfileRow.version)
                        .where(col(ProfileRow.project_id) == project_id).order_by(col(ProfileRow.name)))
    return {name: StoredProfile.of(name, text, version) for name, text, version in rows}


def insert_new(session: Session, project_id: str, name: str, text: str, limit: int) -> bool:
    """Insert the profile if the project has fewer than ``limit`` and none called ``name``."""
    table = table_of(ProfileRow)
    now = utcnow()
    values = {"project_id": project_id, "name": name, "document": text, "version": 1,
              "created_at": now, "updated_at": now}
    count = (select_core(func.count()).select_from(table).where(table.c.project_id == project_id)
             .scalar_subquery())
    taken = exists().where(table.c.project_id == project_id, table.c.name == name)
    selected = (select_core(*(literal(value, table.c[key].type) for key, value in values.items()))
                .where(count < limit, ~taken))
    result = session.exec(insert(table).from_select(list(values), selected))
    return bool(result.rowcount == 1)


def update_at(session: Session, project_id: str, name: str, text: str, version: int) -> bool:
    """Replace the document and bump the version, only if it is still at ``version``."""
    table = table_of(ProfileRow)
    statement = (update(table)
                 .where(table.c.project_id == project_id, table.c.name == name, table.c.version == version)
                 .values(document=text, version=table.c.version + 1, updated_at=utcnow()))
    return bool(session.exec(statement).rowcount == 1)


def remove(session: Session, project_id: str, name: str, version: int | None) -> bool:
    """Delete the profile (only at ``version``, if given)."""
    table = table_of(ProfileRow)
    conditions = [table.c.project_id == project_id, table.c.name == name]
    if version is not None:
        conditions.append(table.c.version == version)
    return bool(session.exec(delete(table).where(*conditions)).rowcount == 1)


def current_version(session: Session, project_id: str, name: str) -> int | None:
    return session.exec(select(ProfileRow.version).where(
        col(ProfileRow.project_id) == project_id, col(ProfileRow.name) == name)).first()


def explain_create(session: Session, project_id: str, name: str, limit: int) -> NoReturn:
    """Raise why a create changed nothing: the name is taken (PROFILE_CONFLICT with the
    current version) or the project already has ``limit`` profiles (INVALID_PARAMS)."""
    current = current_version(session, project_id, name)
    if current is not None:
        raise ProfileConflict("A profile with this name already exists", currentVersion=current)
    raise InvalidInput(f"A project holds at most {limit} profiles", limit=limit)


def explain_change(session: Session, project_id: str, name: str, version: int | None) -> NoReturn:
    """Raise why an update or a delete changed nothing: no such profile (PROFILE_NOT_FOUND) or
    another version (PROFILE_CONFLICT with the current one)."""
    current = current_version(session, project_id, name)
    if current is None or version is None:
        raise ProfileNotFound()
    raise ProfileConflict(currentVersion=current)
