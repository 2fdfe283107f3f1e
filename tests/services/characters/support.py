"""Shared by the character chat's service and channel tests: a :class:`CharacterChat` wired as
``main.wiring.register_character_chat`` wires it, on a real database and Chroma with the words encoder,
a context service with no providers but the conversation's own, and a scripted completer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from services.assembly.profiles import BudgetProfiles
from services.assembly.service import Collaborators, ContextService
from services.characters.conversations import ConversationStore
from services.characters.memories import MemoryIndex, TypedMemoryStore
from services.characters.service import CharacterChat
from services.knowledge import KgService
from services.profiles.plans import BuiltInPlans
from services.profiles.service import ProfileService
from services.projects import DocumentStore, ProjectService
from services.store import Database
from services.summaries.seam import CompletionRequest, CompletionUnavailable, Summarizer
from services.tokenizer.registry import TokenizerRegistry
from tests.services.characters.test_memories import WordsEmbedding


@dataclass(frozen=True)
class Unavailable:
    reason: str


@dataclass
class PurposeCompleter:
    """Answers each request by its purpose (``character.keyframe``, ``character.memories``) once
    ``gate`` is set (at once by default): the text given, or CompletionUnavailable with the reason
    given as ``Unavailable``. A purpose without an answer is unavailable (``no_client``). Records
    every request it was sent."""

    answers: dict[str, str | Unavailable] = field(default_factory=dict)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    seen: list[CompletionRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gate.set()

    async def complete(self, request: CompletionRequest) -> str:
        self.seen.append(request)
        await self.gate.wait()
        answer = self.answers.get(request.purpose, Unavailable("no_client"))
        if isinstance(answer, Unavailable):
            raise CompletionUnavailable(answer.reason)
        return answer

    def purposes(self) -> list[str]:
        return [r.purpose for r in self.seen]


@dataclass
class Parts:
    """A character chat and the services around it, on one database."""

    chat: CharacterChat
    projects: ProjectService
    kg: KgService
    profiles: ProfileService
    memories: TypedMemoryStore
    completer: PurposeCompleter


def character_chat(database: Database, vectors: Any, completer: PurposeCompleter | None = None,
                   *, wait: float = 15.0) -> Parts:
    """A CharacterChat as ``register_character_chat`` builds it, with the words encoder."""
    completer = completer or PurposeCompleter()
    projects, documents, kg = ProjectService(database), DocumentStore(database), KgService(database)
    plans = ProfileService(database, BuiltInPlans())
    context = ContextService(Collaborators(
        settings=projects.get_settings, read_document=documents.read, profiles=BudgetProfiles(database).get,
        providers=(), tokenizers=TokenizerRegistry(), plans=plans))
    memories = TypedMemoryStore(database, MemoryIndex(vectors, WordsEmbedding()))

    async def language(project_id: str) -> str:
        return (await projects.get_settings(project_id)).language

    chat = CharacterChat(conversations=ConversationStore(database), memories=memories, entities=kg.list,
                         language=language, context=context, plans=plans,
                         summarizer=Summarizer(completer), completer=completer, wait=wait)
    return Parts(chat, projects, kg, plans, memories, completer)
