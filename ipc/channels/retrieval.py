"""index:* methods: the state of a project's retrieval index."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ipc.channels.projects import ProjectScoped
from ipc.context import CallContext
from ipc.errors import ProjectNotFound, ProjectPathInvalid
from ipc.models import WireModel
from ipc.registry import Registry

if TYPE_CHECKING:
    from services.retrieval.service import IndexStatus as Status


class Statuses(Protocol):
    """What index:status asks of retrieval (the service, or the server's deferred one)."""

    async def status(self, project_id: str) -> Status: ...


class IndexStatus(WireModel):
    project_id: str
    indexing: bool
    documents: int
    chunks: int


def register_retrieval(registry: Registry, retrieval: Statuses) -> None:
    """Add index:status to ``registry``."""

    @registry.method("index:status", params=ProjectScoped, result=IndexStatus,
                     summary="Whether the project's retrieval index is settled (indexing: false) and "
                             "how many documents and chunks searches see; starts indexing the "
                             "project if it was not yet.",
                     errors=(ProjectNotFound, ProjectPathInvalid))
    async def index_status(params: ProjectScoped, ctx: CallContext) -> IndexStatus:
        status = await retrieval.status(params.project_id)
        return IndexStatus(project_id=status.project_id, indexing=status.indexing,
                           documents=status.documents, chunks=status.chunks)
