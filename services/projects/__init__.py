"""Projects: folders of the writer's documents, their settings, and the documents themselves.

The names below load with their modules on first use: :mod:`services.projects.roots` (the rules
for where a project may be) is read before the server's ready line, and must not bring the
database's libraries with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.projects.documents import DocumentStore
    from services.projects.records import (
        DocumentInfo,
        DocumentListing,
        ProjectRecord,
        Record,
        SettingsRecord,
    )
    from services.projects.service import ProjectService, project_id_for

_HOMES = {
    "DocumentStore": "documents",
    "DocumentInfo": "records",
    "DocumentListing": "records",
    "ProjectRecord": "records",
    "Record": "records",
    "SettingsRecord": "records",
    "ProjectService": "service",
    "project_id_for": "service",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "DocumentInfo",
    "DocumentListing",
    "DocumentStore",
    "ProjectRecord",
    "ProjectService",
    "Record",
    "SettingsRecord",
    "project_id_for",
]
