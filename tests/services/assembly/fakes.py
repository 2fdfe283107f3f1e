"""In-memory collaborators for ContextService tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from services.assembly.service import Collaborators, ContextService
from services.context.models import BudgetProfile
from services.errors import DocumentNotFound, ProjectNotFound
from services.sources.providers import (
    EpisodicMemoryProvider,
    KnowledgeGraphProvider,
    SemanticMemoryProvider,
    UserConstraintsProvider,
)
from services.tokenizer.registry import TokenizerRegistry


@dataclass
class Settings:
    language: str = "zh"
    narrative_person: str = ""
    style_notes: str = ""
    model: str = "gpt-4"
    tokenizer_path: str | None = None
    skill_prompts: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Constraint:
    id: int
    project_id: str
    text: str
    kind: str = "narrative"
    source: str = "user"
    priority: int = 0


@dataclass
class Entity:
    id: int
    project_id: str
    name: str
    description: str
    kind: str = "character"
    aliases: Sequence[str] = ()


@dataclass
class Rule:
    id: int
    project_id: str
    text: str
    confidence: float = 0.8
    confirmed: bool = True


@dataclass
class Episode:
    id: int
    project_id: str
    instruction: str
    output: str
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class World:
    """Everything one test project holds."""

    project_id: str = "p1"
    settings: Settings = field(default_factory=Settings)
    documents: dict[str, str] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    entities: list[Entity] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    profile: BudgetProfile = field(default_factory=BudgetProfile)

    def episode(self, n: int, instruction: str, output: str) -> None:
        when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=n)
        self.episodes.append(Episode(n, self.project_id, instruction, output, when))

    def _check(self, project_id: str) -> None:
        if project_id != self.project_id:
            raise ProjectNotFound()

    async def get_settings(self, project_id: str) -> Settings:
        self._check(project_id)
        return self.settings

    async def read(self, project_id: str, document_id: str) -> str:
        self._check(project_id)
        if document_id not in self.documents:
            raise DocumentNotFound()
        return self.documents[document_id]

    async def get_profile(self, project_id: str) -> BudgetProfile:
        self._check(project_id)
        return self.profile

    async def get_constraints(self, project_id: str) -> list[Constraint]:
        return [c for c in self.constraints if c.project_id == project_id]

    async def get_entities(self, project_id: str) -> list[Entity]:
        return [e for e in self.entities if e.project_id == project_id]

    async def get_rules(self, project_id: str) -> list[Rule]:
        return [r for r in self.rules if r.project_id == project_id]

    async def get_episodes(self, project_id: str) -> list[Episode]:
        return [e for e in self.episodes if e.project_id == project_id]

    def service(self, registry: TokenizerRegistry | None = None) -> ContextService:
        providers = (
            UserConstraintsProvider(self.get_constraints),
            KnowledgeGraphProvider(self.get_constraints, self.get_entities),
            SemanticMemoryProvider(self.get_rules),
            EpisodicMemoryProvider(self.get_episodes),
        )
        return ContextService(Collaborators(
            settings=self.get_settings, read_document=self.read, profiles=self.get_profile,
            providers=providers, tokenizers=registry or TokenizerRegistry()))
