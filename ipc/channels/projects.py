"""project:* and document:* methods: open a folder as a project, its settings, its documents.

Wire records subclass the service records, so a record has its fields
written once: the wire class adds camelCase names, and pydantic reads a
service record into it by attribute (``from_attributes``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from ipc.context import CallContext
from ipc.errors import (
    DocumentNotFound,
    InvalidParams,
    ProjectNotFound,
    ProjectPathInvalid,
    ProjectScopeViolation,
    RecordVersionConflict,
)
from ipc.models import NoParams, WireModel
from ipc.registry import Registry
from services.errors import ProjectPathForbidden
from services.projects import DocumentStore, ProjectService, records
from services.projects.document_ids import MAX_DOCUMENT_ID
from services.projects.documents import MAX_DOCUMENT_BYTES
from services.projects.records import Language
from services.projects.service import MAX_NAME
from services.projects.settings import (
    MAX_PATH,
    ModelName,
    NarrativePerson,
    ReadingPageTokens,
    SkillPrompts,
    StyleNotes,
    TokenizerPath,
)

ProjectId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
RecordId = Annotated[int, Field(ge=1, le=2**63 - 1)]
Version = Annotated[int, Field(ge=1, le=2**63 - 1)]
DocumentId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_DOCUMENT_ID)]

DOCUMENT_ERRORS = (ProjectNotFound, ProjectPathInvalid, ProjectPathForbidden, ProjectScopeViolation,
                   InvalidParams)


class Project(WireModel, records.ProjectRecord):
    """A registered folder: ``id`` is derived from its real path."""


class ProjectSettings(WireModel, records.SettingsRecord):
    """A project's settings; ``version`` is what an update must name."""


class DocumentInfo(WireModel, records.DocumentInfo):
    """A document file: its id (path relative to the project folder), size in bytes, mtime."""


class ProjectScoped(WireModel):
    """Params of a method that acts within one project."""

    project_id: ProjectId


class RecordParams(ProjectScoped):
    """One record of a project, by id."""

    id: RecordId


class OpenProjectParams(WireModel):
    path: Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH)]
    name: Annotated[str, StringConstraints(max_length=MAX_NAME)] | None = None


class UpdateSettingsParams(ProjectScoped):
    version: Version
    language: Language | None = None
    narrative_person: NarrativePerson | None = None
    style_notes: StyleNotes | None = None
    model: ModelName | None = None
    tokenizer_path: TokenizerPath | None = None
    skill_prompts: SkillPrompts | None = None
    reading_page_tokens: ReadingPageTokens | None = Field(
        default=None, description="the reading companion's page size, in tokens, for chapters without "
                                  "page markers (50..4000, default 400)")


class DocumentParams(ProjectScoped):
    document_id: DocumentId


class WriteDocumentParams(DocumentParams):
    text: Annotated[str, StringConstraints(max_length=MAX_DOCUMENT_BYTES)]


class ProjectResult(WireModel):
    project: Project


class ProjectList(WireModel):
    projects: list[Project]


class SettingsResult(WireModel):
    settings: ProjectSettings


class DocumentList(WireModel):
    documents: list[DocumentInfo]
    truncated: bool


class DocumentText(WireModel):
    document_id: str
    text: str


class DocumentWritten(WireModel):
    document: DocumentInfo


def register_projects(registry: Registry, *, projects: ProjectService,
                      documents: DocumentStore) -> None:
    """Add project:open, project:list, project:settings:get/update and document:* to ``registry``."""

    @registry.method("project:open", params=OpenProjectParams, result=ProjectResult,
                     summary="Register a folder of documents as a project (same folder, same id).",
                     errors=(ProjectPathInvalid, ProjectPathForbidden))
    async def open_project(params: OpenProjectParams, ctx: CallContext) -> ProjectResult:
        return ProjectResult(project=await projects.open(params.path, params.name))

    @registry.method("project:list", params=NoParams, result=ProjectList,
                     summary="Every registered project, by name.")
    async def list_projects(params: NoParams, ctx: CallContext) -> ProjectList:
        return ProjectList(projects=await projects.list())

    @registry.method("project:settings:get", params=ProjectScoped, result=SettingsResult,
                     summary="A project's settings and their version.", errors=(ProjectNotFound,))
    async def get_settings(params: ProjectScoped, ctx: CallContext) -> SettingsResult:
        return SettingsResult(settings=await projects.get_settings(params.project_id))

    @registry.method("project:settings:update", params=UpdateSettingsParams, result=SettingsResult,
                     summary="Change settings if still at `version`; returns them at version + 1.",
                     errors=(ProjectNotFound, RecordVersionConflict, InvalidParams))
    async def update_settings(params: UpdateSettingsParams, ctx: CallContext) -> SettingsResult:
        fields = params.model_dump(exclude_unset=True, exclude={"project_id", "version"})
        return SettingsResult(settings=await projects.update_settings(
            params.project_id, params.version, **fields))

    register_documents(registry, documents)


def register_documents(registry: Registry, documents: DocumentStore) -> None:
    """Add document:list, document:read and document:write to ``registry``."""

    @registry.method("document:list", params=ProjectScoped, result=DocumentList,
                     summary="The project's .md, .markdown and .txt files, sorted by id.",
                     errors=(ProjectNotFound, ProjectPathInvalid, ProjectPathForbidden))
    async def list_documents(params: ProjectScoped, ctx: CallContext) -> DocumentList:
        listing = await documents.list(params.project_id)
        return DocumentList(documents=listing.documents, truncated=listing.truncated)

    @registry.method("document:read", params=DocumentParams, result=DocumentText,
                     summary="A document's UTF-8 text.", errors=(*DOCUMENT_ERRORS, DocumentNotFound))
    async def read_document(params: DocumentParams, ctx: CallContext) -> DocumentText:
        text = await documents.read(params.project_id, params.document_id)
        return DocumentText(document_id=params.document_id, text=text)

    @registry.method("document:write", params=WriteDocumentParams, result=DocumentWritten,
                     summary="Replace or create a document atomically, inside the project folder.",
                     errors=(*DOCUMENT_ERRORS, DocumentNotFound))  # a FIFO, socket or device has its id
    async def write_document(params: WriteDocumentParams, ctx: CallContext) -> DocumentWritten:
        info = await documents.write(params.project_id, params.document_id, params.text)
        return DocumentWritten(document=info)
