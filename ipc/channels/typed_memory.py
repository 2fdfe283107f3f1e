"""memory:typed:* methods: a character pair's typed memories (seed 003).

A memory on the wire is the service record in camelCase: ``{id, projectId, memoryType,
importance, summary, content, source, systemCharacterId, userCharacterId, scope,
conversationId, messageId, characterId, createdAt}``. The character ids of an add or a search
must name knowledge-graph entities of the project, as a conversation's do (CHARACTER_NOT_FOUND
otherwise); a conversation must be one of the project's and of this pair (CONVERSATION_NOT_FOUND
otherwise). A memory id of another project answers MEMORY_NOT_FOUND, as if it did not exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, Field, StringConstraints

from ipc.channels.projects import ProjectScoped
from ipc.context import CallContext
from ipc.errors import InvalidParams, ProjectNotFound
from ipc.models import WireModel
from ipc.registry import Registry
from services.characters import memories as records
from services.characters.memories import (
    MAX_LISTED,
    MEMORY_TYPES,
    Content,
    ConversationId,
    Importance,
    MemoryQuery,
    MemoryType,
    RowId,
    Scope,
    Source,
    Summary,
    TypedMemoryStore,
    checked_draft,
    pair_key,
)
from services.errors import CharacterNotFound, ConversationNotFound, MemoryNotFound
from services.knowledge.records import KgEntityRecord
from services.projects.inputs import invalid
from services.segments.records import unicode_text

Characters = Callable[[str], Awaitable[Sequence[KgEntityRecord]]]
ConversationPair = Callable[[str, str], Awaitable[tuple[int, int]]]
ConversationMessage = Callable[[str, str, int], Awaitable[bool]]
Types = Annotated[list[MemoryType], Field(max_length=len(MEMORY_TYPES))]
QueryText = Annotated[str, StringConstraints(max_length=2000), AfterValidator(unicode_text)]
MAX_SEARCHED = 200


class TypedMemory(WireModel, records.TypedMemory):
    """A character memory: typed, weighted, of a pair of characters (whichever speaks as the
    system), in pair, conversation or exchange scope."""


W = TypeVar("W", bound=TypedMemory)


class RecalledMemory(TypedMemory):
    similarity: float | None = Field(description="cosine similarity to the query; null when the "
                                                 "memory was not found by it")


class AddParams(ProjectScoped):
    memory_type: MemoryType
    importance: Importance = 5
    summary: Summary
    content: Content = ""
    source: Source = "user"
    system_character_id: RowId | None = Field(default=None, description="default: the conversation's")
    user_character_id: RowId | None = Field(default=None, description="default: the conversation's")
    scope: Scope = "pair"
    conversation_id: ConversationId | None = None
    message_id: RowId | None = None
    character_id: RowId | None = None


class ListParams(ProjectScoped):
    system_character_id: RowId | None = None
    user_character_id: RowId | None = None
    types: Types | None = None
    conversation_id: ConversationId | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_LISTED)] = 100
    offset: Annotated[int, Field(ge=0, le=2**31)] = 0


class SearchParams(ProjectScoped):
    system_character_id: RowId
    user_character_id: RowId
    conversation_id: ConversationId | None = None
    types: Types | None = None
    query: QueryText | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCHED)] = 50
    min_similarity: Annotated[float, Field(ge=-1.0, le=1.0)] = 0.2


class DeleteParams(ProjectScoped):
    memory_id: RowId


class MemoryList(WireModel):
    memories: list[TypedMemory]
    total: int


class RecalledList(WireModel):
    memories: list[RecalledMemory]


class Deleted(WireModel):
    deleted: bool = True


def register_typed_memory(registry: Registry, memories: TypedMemoryStore, characters: Characters,
                          conversation_pair: ConversationPair,
                          conversation_message: ConversationMessage) -> None:
    """Add memory:typed:add, :list, :search and :delete to ``registry``.

    ``characters(project_id)``: the project's kg entities (ProjectNotFound for no project);
    ``conversation_pair(project_id, conversation_id)``: its (system, user) character ids, or
    ConversationNotFound; ``conversation_message(project_id, conversation_id, message_id)``:
    whether the message is the conversation's.
    """

    async def check_pair(project_id: str, system_id: int, user_id: int, conversation_id: str | None) -> None:
        # Any kg entity of the project, as for a conversation: one that can talk can be remembered.
        known = {entity.id for entity in await characters(project_id)}
        for character_id in (system_id, user_id):
            if character_id not in known:
                raise CharacterNotFound(characterId=character_id)
        if conversation_id is not None:
            await check_conversation(project_id, conversation_id, pair_key(system_id, user_id))

    async def check_conversation(project_id: str, conversation_id: str, pair: str | None) -> None:
        system_id, user_id = await conversation_pair(project_id, conversation_id)
        if pair is not None and pair_key(system_id, user_id) != pair:
            raise ConversationNotFound()  # it exists, but not for this pair: the same as none

    @registry.method("memory:typed:add", params=AddParams, result=TypedMemory,
                     summary="Remember something about a pair of characters (in pair, conversation or "
                             "exchange scope).",
                     errors=(ProjectNotFound, CharacterNotFound, ConversationNotFound, InvalidParams))
    async def add(params: AddParams, ctx: CallContext) -> TypedMemory:
        raw = params.model_dump(exclude={"project_id"})
        if params.system_character_id is None or params.user_character_id is None:
            if params.conversation_id is None:
                raise InvalidParams("systemCharacterId and userCharacterId, or a conversationId, are "
                                    "required", missing=["systemCharacterId", "userCharacterId"])
            # A memory of a conversation is of its pair: the ids may be left out.
            system_id, user_id = await conversation_pair(params.project_id, params.conversation_id)
            raw["system_character_id"] = params.system_character_id or system_id
            raw["user_character_id"] = params.user_character_id or user_id
        draft = checked_draft(raw)  # cross-field rules first
        await check_pair(params.project_id, draft.system_character_id, draft.user_character_id,
                         draft.conversation_id)
        if draft.message_id is not None and draft.conversation_id is not None and \
                not await conversation_message(params.project_id, draft.conversation_id, draft.message_id):
            raise invalid("message_id", "is not a message of the conversation")
        return _wire(TypedMemory, await memories.add(params.project_id, draft))

    @registry.method("memory:typed:list", params=ListParams, result=MemoryList,
                     summary="A page of the project's memories, newest first (of a pair, or of one "
                             "character, of some types, from one conversation), and how many match.",
                     errors=(ProjectNotFound, ConversationNotFound, InvalidParams))
    async def list_memories(params: ListParams, ctx: CallContext) -> MemoryList:
        if params.conversation_id is not None:
            both = params.system_character_id is not None and params.user_character_id is not None
            pair = (pair_key(params.system_character_id or 0, params.user_character_id or 0)
                    if both else None)
            await check_conversation(params.project_id, params.conversation_id, pair)
        found, total = await memories.list(
            params.project_id, system_character_id=params.system_character_id,
            user_character_id=params.user_character_id,
            types=frozenset(params.types) if params.types is not None else None,
            conversation_id=params.conversation_id, limit=params.limit, offset=params.offset)
        return MemoryList(memories=[_wire(TypedMemory, m) for m in found], total=total)

    @registry.method("memory:typed:search", params=SearchParams, result=RecalledList,
                     summary="The pair's memories in scope (and the conversation's own), by importance, "
                             "recency and similarity to `query`; for a pair with none yet, each "
                             "character's own PERSONALITY and PREFERENCE memories, as a prompt recalls them.",
                     errors=(ProjectNotFound, CharacterNotFound, ConversationNotFound, InvalidParams))
    async def search(params: SearchParams, ctx: CallContext) -> RecalledList:
        await check_pair(params.project_id, params.system_character_id, params.user_character_id,
                         params.conversation_id)
        found = await memories.search_or_personal(params.project_id, MemoryQuery(
            params.system_character_id, params.user_character_id, params.conversation_id,
            frozenset(params.types) if params.types is not None else None, params.query,
            params.limit, params.min_similarity))
        return RecalledList(memories=[_wire(RecalledMemory, r.memory, similarity=r.similarity)
                                      for r in found])

    @registry.method("memory:typed:delete", params=DeleteParams, result=Deleted,
                     summary="Delete a typed memory.", errors=(ProjectNotFound, MemoryNotFound))
    async def delete(params: DeleteParams, ctx: CallContext) -> Deleted:
        await memories.delete(params.project_id, params.memory_id)
        return Deleted()


def _wire(model: type[W], memory: records.TypedMemory, **extra: Any) -> W:
    return model.model_validate({**memory.model_dump(), **extra})
