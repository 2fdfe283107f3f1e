"""constraints:* and kg:entity:* methods: what the writer has said must hold.

Records are the service records with camelCase names (see projects.py). An
id of another project's record answers RECORD_NOT_FOUND, as if it did not
exist.
"""

from __future__ import annotations

from ipc.channels.projects import ProjectScoped, RecordId, RecordParams, Version
from ipc.context import CallContext
from ipc.errors import (
    ConstraintsLimit,
    InvalidParams,
    ProjectNotFound,
    RecordNotFound,
    RecordVersionConflict,
)
from ipc.models import Ack, WireModel
from ipc.registry import Registry
from services.knowledge import ConstraintService, KgService, records
from services.knowledge.records import (
    Aliases,
    ConstraintKind,
    ConstraintSource,
    ConstraintText,
    Description,
    EntityKind,
    EntityName,
    Priority,
)

UPDATE_ERRORS = (ProjectNotFound, RecordNotFound, RecordVersionConflict, InvalidParams)


class Constraint(WireModel, records.ConstraintRecord):
    """A writing constraint; higher ``priority`` is more important."""


class KgEntity(WireModel, records.KgEntityRecord):
    """A knowledge-graph entity, unique by (kind, name) in its project."""


class CreateConstraintParams(ProjectScoped):
    kind: ConstraintKind
    text: ConstraintText
    source: ConstraintSource = "user"
    priority: Priority = 0


class UpdateConstraintParams(ProjectScoped):
    id: RecordId
    version: Version | None = None
    kind: ConstraintKind | None = None
    text: ConstraintText | None = None
    source: ConstraintSource | None = None
    priority: Priority | None = None


class ListEntitiesParams(ProjectScoped):
    kind: EntityKind | None = None


class UpsertEntityParams(ProjectScoped):
    id: RecordId | None = None
    version: Version | None = None
    kind: EntityKind
    name: EntityName
    aliases: Aliases | None = None
    description: Description | None = None


class ConstraintList(WireModel):
    constraints: list[Constraint]


class ConstraintResult(WireModel):
    constraint: Constraint


class EntityList(WireModel):
    entities: list[KgEntity]


class EntityResult(WireModel):
    entity: KgEntity
    created: bool


def register_knowledge(registry: Registry, *, constraints: ConstraintService, kg: KgService) -> None:
    """Add constraints:* and kg:entity:* to ``registry``."""
    register_constraints(registry, constraints)
    register_kg(registry, kg)


def register_constraints(registry: Registry, constraints: ConstraintService) -> None:
    @registry.method("constraints:list", params=ProjectScoped, result=ConstraintList,
                     summary="The project's constraints, by priority (highest first), then age.",
                     errors=(ProjectNotFound,))
    async def list_constraints(params: ProjectScoped, ctx: CallContext) -> ConstraintList:
        return ConstraintList(constraints=await constraints.list(params.project_id))

    @registry.method("constraints:create", params=CreateConstraintParams, result=ConstraintResult,
                     summary="Add a constraint (at most 500 per project).",
                     errors=(ProjectNotFound, ConstraintsLimit, InvalidParams))
    async def create_constraint(params: CreateConstraintParams, ctx: CallContext) -> ConstraintResult:
        return ConstraintResult(constraint=await constraints.create(
            params.project_id, kind=params.kind, text=params.text, source=params.source,
            priority=params.priority))

    @registry.method("constraints:update", params=UpdateConstraintParams, result=ConstraintResult,
                     summary="Change the given fields; with `version`, only if still at it.",
                     errors=UPDATE_ERRORS)
    async def update_constraint(params: UpdateConstraintParams, ctx: CallContext) -> ConstraintResult:
        fields = params.model_dump(exclude_none=True, exclude={"project_id", "id", "version"})
        return ConstraintResult(constraint=await constraints.update(
            params.project_id, params.id, version=params.version, **fields))

    @registry.method("constraints:delete", params=RecordParams, result=Ack,
                     summary="Delete a constraint.", errors=(ProjectNotFound, RecordNotFound))
    async def delete_constraint(params: RecordParams, ctx: CallContext) -> Ack:
        await constraints.delete(params.project_id, params.id)
        return Ack()


def register_kg(registry: Registry, kg: KgService) -> None:
    @registry.method("kg:entity:list", params=ListEntitiesParams, result=EntityList,
                     summary="The project's knowledge-graph entities (of one kind), by kind and name.",
                     errors=(ProjectNotFound,))
    async def list_entities(params: ListEntitiesParams, ctx: CallContext) -> EntityList:
        return EntityList(entities=await kg.list(params.project_id, params.kind))

    @registry.method("kg:entity:upsert", params=UpsertEntityParams, result=EntityResult,
                     summary="Update the entity with `id`, else the one of this kind and name; "
                             "create it if there is none.",
                     errors=UPDATE_ERRORS)
    async def upsert_entity(params: UpsertEntityParams, ctx: CallContext) -> EntityResult:
        entity, created = await kg.upsert(
            params.project_id, kind=params.kind, name=params.name, aliases=params.aliases,
            description=params.description, entity_id=params.id, version=params.version)
        return EntityResult(entity=entity, created=created)

    @registry.method("kg:entity:delete", params=RecordParams, result=Ack,
                     summary="Delete a knowledge-graph entity.",
                     errors=(ProjectNotFound, RecordNotFound))
    async def delete_entity(params: RecordParams, ctx: CallContext) -> Ack:
        await kg.delete(params.project_id, params.id)
        return Ack()
