"""segments:* methods: a project's stored prompt segments (the game-master profile's scopes).

A segment on the wire is ``{id, scope, refId, content, metadata: {tier, type,
priority}, active, locale, version, createdAt, updatedAt}``; ``segments:export``
gives an array of them that ``segments:import`` takes back. An id of another
project's segment answers RECORD_NOT_FOUND, as if it did not exist.

Import entries travel as plain JSON values, so that the service checks them
all and refuses with every problem at once (``problems: [{index, field,
message}]``) rather than the dispatcher stopping at the params' shape;
``rpc.discover`` still describes each entry (``ImportEntry``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from ipc.channels.projects import ProjectScoped, RecordParams, Version
from ipc.context import CallContext
from ipc.errors import InvalidParams, ProjectNotFound, RecordNotFound, RecordVersionConflict
from ipc.models import Ack, WireModel
from ipc.registry import Registry
from services.segments import SegmentRecord, SegmentService
from services.segments.records import (
    MAX_SEGMENTS,
    ImportEntry,
    RefId,
    Scope,
    SegmentDocument,
    SegmentInput,
)


class _EntryJson:
    """Validated as any JSON value; described as an ``ImportEntry`` (a components entry)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.any_schema()

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return handler(ImportEntry.__pydantic_core_schema__)


EntryJson = Annotated[Any, _EntryJson]


class Segment(WireModel, SegmentDocument):
    """A stored prompt segment; ``version`` is what an update or delete may name."""


class ListSegmentsParams(ProjectScoped):
    scope: Scope | None = None
    ref_id: RefId | None = None
    active_only: bool = False


class UpsertSegmentParams(ProjectScoped):
    segment: SegmentInput
    version: Version | None = Field(default=None, description="with segment.id: update only at this version")


class DeleteSegmentParams(RecordParams):
    version: Version | None = None


class ImportSegmentsParams(ProjectScoped):
    segments: Annotated[list[EntryJson], Field(max_length=MAX_SEGMENTS)]


class SegmentList(WireModel):
    segments: list[Segment]


class ImportResult(WireModel):
    imported: int
    segments: list[Segment]


def _wire(records: list[SegmentRecord]) -> list[Segment]:
    return [Segment.of(record) for record in records]


def register_segments(registry: Registry, segments: SegmentService) -> None:
    """Add segments:list, :upsert, :delete, :import and :export to ``registry``."""

    @registry.method("segments:list", params=ListSegmentsParams, result=SegmentList,
                     summary="The project's segments (of a scope, a refId, active only) by scope "
                             "in prompt order, refId, tier and id.",
                     errors=(ProjectNotFound, InvalidParams))
    async def list_segments(params: ListSegmentsParams, ctx: CallContext) -> SegmentList:
        return SegmentList(segments=_wire(await segments.list(
            params.project_id, scope=params.scope, ref_id=params.ref_id, active_only=params.active_only)))

    @registry.method("segments:upsert", params=UpsertSegmentParams, result=Segment,
                     summary="Create a segment (no id), or change the fields given of segment `id` "
                             "(at `version`, if given).",
                     errors=(ProjectNotFound, RecordNotFound, RecordVersionConflict, InvalidParams))
    async def upsert_segment(params: UpsertSegmentParams, ctx: CallContext) -> Segment:
        return Segment.of(await segments.upsert(params.project_id, params.segment, params.version))

    @registry.method("segments:delete", params=DeleteSegmentParams, result=Ack,
                     summary="Delete a segment (at `version`, if given).",
                     errors=(ProjectNotFound, RecordNotFound, RecordVersionConflict))
    async def delete_segment(params: DeleteSegmentParams, ctx: CallContext) -> Ack:
        await segments.delete(params.project_id, params.id, params.version)
        return Ack()

    @registry.method("segments:import", params=ImportSegmentsParams, result=ImportResult,
                     summary="Write every segment or none: an entry with the id of one of the "
                             "project's segments replaces it, others are created.",
                     errors=(ProjectNotFound, InvalidParams))
    async def import_segments(params: ImportSegmentsParams, ctx: CallContext) -> ImportResult:
        imported = await segments.import_(params.project_id, params.segments)
        return ImportResult(imported=len(imported), segments=_wire(imported))

    @registry.method("segments:export", params=ProjectScoped, result=SegmentList,
                     summary="Every segment of the project, as segments:import takes them back.",
                     errors=(ProjectNotFound,))
    async def export_segments(params: ProjectScoped, ctx: CallContext) -> SegmentList:
        return SegmentList.model_validate({"segments": await segments.export(params.project_id)})
