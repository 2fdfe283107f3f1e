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
from services.projects.settings import encoding_for_model

__all__ = [
    "DocumentInfo",
    "DocumentListing",
    "DocumentStore",
    "ProjectRecord",
    "ProjectService",
    "Record",
    "SettingsRecord",
    "encoding_for_model",
    "project_id_for",
]
