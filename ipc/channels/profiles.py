"""profile:* methods: a project's assembly profiles, listed, read, saved, deleted and validated.

A profile travels as a plain JSON object: the service validates it, so an
invalid one comes back as PROFILE_INVALID with a JSON pointer per problem
rather than as a generic INVALID_PARAMS. ``rpc.discover`` still publishes the
profile's JSON Schema (``ProfileDocument`` and its parts, generated from
:mod:`services.profiles.schema`) for those params and results.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import Field, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from ipc.channels.projects import ProjectId, ProjectScoped, Version
from ipc.context import CallContext
from ipc.errors import (
    InvalidParams,
    ProfileConflict,
    ProfileInvalid,
    ProfileNotFound,
    ProfileReadOnly,
    ProjectNotFound,
)
from ipc.models import Ack, WireModel
from ipc.registry import Registry
from services.profiles.schema import NAME_PATTERN, ProfileDocument
from services.profiles.service import ProfileService, ProfileView


class _ProfileJson:
    """Validated as any JSON object; described as a ``ProfileDocument`` (a components entry)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        # The model's own schema, so its parts land in components beside it as $refs.
        return handler(ProfileDocument.__pydantic_core_schema__)


ProfileJson = Annotated[dict[str, Any], _ProfileJson]
ProfileName = Annotated[str, Field(pattern=NAME_PATTERN)]
AnyName = Annotated[str, Field(min_length=1, max_length=64)]


class ProfileProblem(TypedDict):
    """What is wrong and where: ``path`` is a JSON pointer into the profile sent; ``profile``
    names another profile of the project when the problem is that one's."""

    path: str
    message: str
    profile: NotRequired[str]


class ProfileRef(ProjectScoped):
    name: AnyName


class PutParams(ProjectScoped):
    name: ProfileName
    profile: ProfileJson
    version: Version | None = Field(default=None, description="the version read; absent: create")


class DeleteParams(ProfileRef):
    version: Version | None = None


class ValidateParams(WireModel):
    profile: ProfileJson
    project_id: ProjectId | None = Field(default=None, description="resolve against this project's profiles")


class ProfileSummary(WireModel):
    name: str
    description: str | None
    extends: str | None
    built_in: bool
    version: int


class ProfileList(WireModel):
    profiles: list[ProfileSummary]


class ProfileResult(WireModel):
    profile: ProfileJson
    resolved: ProfileJson
    version: int
    built_in: bool


class ProfileValidation(WireModel):
    valid: bool
    problems: list[ProfileProblem]
    resolved: ProfileJson | None = None


def _result(view: ProfileView) -> ProfileResult:
    return ProfileResult(profile=view.profile, resolved=view.resolved, version=view.version,
                         built_in=view.built_in)


def register_profiles(registry: Registry, profiles: ProfileService) -> None:
    """Add profile:* to ``registry``."""

    @registry.method("profile:list", params=ProjectScoped, result=ProfileList,
                     summary="The built-in profiles, then the project's own by name.",
                     errors=(ProjectNotFound,))
    async def list_profiles(params: ProjectScoped, ctx: CallContext) -> ProfileList:
        found = await profiles.list(params.project_id)
        return ProfileList(profiles=[ProfileSummary(
            name=p.name, description=p.description, extends=p.extends, built_in=p.built_in,
            version=p.version) for p in found])

    @registry.method("profile:get", params=ProfileRef, result=ProfileResult,
                     summary="A profile as stored and resolved (extends applied), with its version.",
                     errors=(ProjectNotFound, ProfileNotFound))
    async def get_profile(params: ProfileRef, ctx: CallContext) -> ProfileResult:
        return _result(await profiles.get(params.project_id, params.name))

    @registry.method("profile:put", params=PutParams, result=ProfileResult,
                     summary="Create a project profile, or replace it if `version` is still current.",
                     errors=(ProjectNotFound, ProfileInvalid, ProfileConflict, ProfileNotFound,
                             ProfileReadOnly, InvalidParams))
    async def put_profile(params: PutParams, ctx: CallContext) -> ProfileResult:
        return _result(await profiles.put(params.project_id, params.name, params.profile, params.version))

    @registry.method("profile:delete", params=DeleteParams, result=Ack,
                     summary="Delete a project profile that no other profile extends.",
                     errors=(ProjectNotFound, ProfileNotFound, ProfileConflict, ProfileInvalid,
                             ProfileReadOnly))
    async def delete_profile(params: DeleteParams, ctx: CallContext) -> Ack:
        await profiles.delete(params.project_id, params.name, params.version)
        return Ack()

    @registry.method("profile:validate", params=ValidateParams, result=ProfileValidation,
                     summary="Check a profile without saving it: its problems, or its resolved form.",
                     errors=(ProjectNotFound,))
    async def validate_profile(params: ValidateParams, ctx: CallContext) -> ProfileValidation:
        checked = await profiles.validate(params.profile, params.project_id)
        return ProfileValidation.model_validate(
            {"valid": checked.valid, "problems": checked.problems, "resolved": checked.resolved})
