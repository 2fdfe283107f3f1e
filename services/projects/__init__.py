"""Projects: folders of the writer's documents, their settings, and the documents themselves."""

from services.projects.documents import DocumentStore
from services.projects.records import (
    DocumentInfo,
    DocumentListing,
    ProjectRecord,
    Record,
    SettingsRecord,
)
from services.projects.service import ProjectService, project_id_for

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
