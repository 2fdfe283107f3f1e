"""memory:semantic:* and memory:episodic:* methods: learned rules and past interactions.

Records are the service records with camelCase names (see projects.py).
"""

from __future__ import annotations

from ipc.channels.projects import DocumentId, ProjectScoped, RecordId, RecordParams, Version
from ipc.context import CallContext
from ipc.errors import (
    InvalidParams,
    ProjectNotFound,
    ProjectScopeViolation,
    RecordNotFound,
    RecordVersionConflict,
)
from ipc.models import Ack, WireModel
from ipc.registry import Registry
from services.memory import EpisodicMemoryService, SemanticMemoryService, records
from services.memory.records import (
    DEFAULT_EPISODES_LISTED,
    Category,
    Confidence,
    EpisodeLimit,
    Instruction,
    Output,
    RuleText,
)
from services.projects.inputs import SkillId


class SemanticRule(WireModel, records.SemanticRuleRecord):
    """A learned preference; the Settings layer keeps the most confident first."""


class Episode(WireModel, records.EpisodeRecord):
    """One past interaction: the instruction and the output the writer accepted."""


class ListRulesParams(ProjectScoped):
    confirmed_only: bool = False


class UpsertRuleParams(ProjectScoped):
    id: RecordId | None = None
    version: Version | None = None
    text: RuleText | None = None
    category: Category | None = None
    confidence: Confidence | None = None
    confirmed: bool | None = None


class AddEpisodeParams(ProjectScoped):
    instruction: Instruction = ""
    output: Output
    document_id: DocumentId | None = None
    skill_id: SkillId | None = None


class ListEpisodesParams(ProjectScoped):
    limit: EpisodeLimit = DEFAULT_EPISODES_LISTED
    document_id: DocumentId | None = None
    skill_id: SkillId | None = None


class RuleList(WireModel):
    rules: list[SemanticRule]


class RuleResult(WireModel):
    rule: SemanticRule
    created: bool


class EpisodeList(WireModel):
    episodes: list[Episode]


class EpisodeResult(WireModel):
    episode: Episode


def register_memory(registry: Registry, *, semantic: SemanticMemoryService,
                    episodic: EpisodicMemoryService) -> None:
    """Add memory:semantic:* and memory:episodic:* to ``registry``."""
    register_semantic(registry, semantic)
    register_episodic(registry, episodic)


def register_semantic(registry: Registry, semantic: SemanticMemoryService) -> None:
    @registry.method("memory:semantic:list", params=ListRulesParams, result=RuleList,
                     summary="The project's semantic rules, most confident first.",
                     errors=(ProjectNotFound,))
    async def list_rules(params: ListRulesParams, ctx: CallContext) -> RuleList:
        return RuleList(rules=await semantic.list(params.project_id,
                                                  confirmed_only=params.confirmed_only))

    @registry.method("memory:semantic:upsert", params=UpsertRuleParams, result=RuleResult,
                     summary="Update the rule with `id`, else the one with this exact text; "
                             "create it if there is none.",
                     errors=(ProjectNotFound, RecordNotFound, RecordVersionConflict, InvalidParams))
    async def upsert_rule(params: UpsertRuleParams, ctx: CallContext) -> RuleResult:
        fields = params.model_dump(exclude_none=True, exclude={"project_id", "id", "version"})
        rule, created = await semantic.upsert(params.project_id, rule_id=params.id,
                                              version=params.version, **fields)
        return RuleResult(rule=rule, created=created)

    @registry.method("memory:semantic:delete", params=RecordParams, result=Ack,
                     summary="Delete a semantic rule.", errors=(ProjectNotFound, RecordNotFound))
    async def delete_rule(params: RecordParams, ctx: CallContext) -> Ack:
        await semantic.delete(params.project_id, params.id)
        return Ack()


def register_episodic(registry: Registry, episodic: EpisodicMemoryService) -> None:
    @registry.method("memory:episodic:add", params=AddEpisodeParams, result=EpisodeResult,
                     summary="Record an accepted output and the instruction behind it.",
                     errors=(ProjectNotFound, ProjectScopeViolation, InvalidParams))
    async def add_episode(params: AddEpisodeParams, ctx: CallContext) -> EpisodeResult:
        return EpisodeResult(episode=await episodic.add(
            params.project_id, output=params.output, instruction=params.instruction,
            document_id=params.document_id, skill_id=params.skill_id))

    @registry.method("memory:episodic:list", params=ListEpisodesParams, result=EpisodeList,
                     summary="The newest episodes first (of one document or skill, if given).",
                     errors=(ProjectNotFound,))
    async def list_episodes(params: ListEpisodesParams, ctx: CallContext) -> EpisodeList:
        return EpisodeList(episodes=await episodic.list(
            params.project_id, limit=params.limit, document_id=params.document_id,
            skill_id=params.skill_id))

    @registry.method("memory:episodic:delete", params=RecordParams, result=Ack,
                     summary="Delete an episode.", errors=(ProjectNotFound, RecordNotFound))
    async def delete_episode(params: RecordParams, ctx: CallContext) -> Ack:
        await episodic.delete(params.project_id, params.id)
        return Ack()
