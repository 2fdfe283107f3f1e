"""chat:conversation:*, chat:message:* and chat:assemble: character conversations (seed 003), thin
over :class:`CharacterChat`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError

from ipc.channels.context import (
    MAX_VARIABLE_CHARS,
    MAX_VARIABLES,
    AssembleResult,
    MessageInfo,
    VariableName,
    result_fields,
)
from ipc.channels.projects import ProjectId
from ipc.context import CallContext
from ipc.dispatch import describe_validation
from ipc.models import WireModel
from ipc.registry import Registry
from services.characters.conversations import Conversation, StoredMessage
from services.characters.display import display
from services.characters.options import ConversationOptions, ignored
from services.characters.service import MAX_MESSAGE_CHARS, Assembled, CharacterChat, Event
from services.errors import (
    Backpressure,
    CharacterNotFound,
    ChatMessageTooLong,
    ConversationFull,
    ConversationNotFound,
    InputTooLarge,
    InvalidParams,
    ProfileInvalid,
    ProfileNotFound,
    ProjectNotFound,
    RecordNotFound,
)

ConversationId = Annotated[str, StringConstraints(min_length=1, max_length=32)]
CharacterId = Annotated[int, Field(ge=1, le=2**53)]


class CreateParams(WireModel):
    project_id: ProjectId
    system_character_id: CharacterId = Field(description="the kg entity the model plays")
    user_character_id: CharacterId = Field(description="the kg entity the writer plays")
    template_name: Annotated[str, StringConstraints(min_length=1, max_length=64)] = Field(
        default="base-roleplay", description="a profile: \"Base Roleplay\" (base-roleplay), \"SMS Chat\" "
                                             "(sms-chat) or one of the project's own")
    options: dict[str, Any] = Field(default_factory=dict, max_length=64,
                                    description="rating, scene, episodes, keyframeEvery, memoryBudget, ...")


class ConversationWire(WireModel):
    conversation_id: str
    project_id: str
    system_character_id: int
    user_character_id: int
    template_name: str
    options: dict[str, Any]
    message_count: int
    created_at: datetime
    updated_at: datetime


class CreateResult(ConversationWire):
    ignored_options: list[str] = Field(description="options of a chat configuration no prompt uses")


class ConversationParams(WireModel):
    conversation_id: ConversationId


class EventWire(WireModel):
    kind: str
    status: str
    stored: int
    warning: str | None


class GetResult(ConversationWire):
    background: list[EventWire] = Field(description="what the latest keyframes and extractions did")
    background_done: dict[str, int] = Field(description="keyframes and extractions finished since the "
                                                        "server started, by kind")


class ListParams(WireModel):
    project_id: ProjectId
    system_character_id: CharacterId | None = None
    user_character_id: CharacterId | None = None
    limit: int = Field(default=100, ge=1, le=500)


class ListResult(WireModel):
    conversations: list[ConversationWire]


class AddParams(WireModel):
    conversation_id: ConversationId
    role: Literal["user", "assistant", "system"]
    content: Annotated[str, StringConstraints(min_length=1, max_length=MAX_MESSAGE_CHARS * 2)]
    important: bool = Field(default=False, description="outlives small talk of its age when history is cut")


class MessageWire(WireModel):
    message_id: int
    conversation_id: str
    seq: int
    role: str
    kind: str
    content: str
    display_content: str
    has_thoughts: bool
    has_reminder: bool
    has_keyframe: bool
    important: bool
    created_at: datetime


class AddResult(WireModel):
    message: MessageWire
    keyframe_due: bool = Field(description="a keyframe is being written in the background")
    extraction_due: bool = Field(description="memories are being extracted in the background")


class MessagesParams(WireModel):
    conversation_id: ConversationId
    after_seq: int = Field(default=0, ge=0)
    limit: int | None = Field(default=None, ge=1, le=10_000)


class MessagesResult(WireModel):
    messages: list[MessageWire]


class ImportantParams(WireModel):
    conversation_id: ConversationId
    message_id: int = Field(ge=1)
    important: bool = True


class ChatAssembleParams(WireModel):
    conversation_id: ConversationId
    variables: dict[VariableName, Annotated[str, Field(max_length=MAX_VARIABLE_CHARS)]] = Field(
        default_factory=dict, max_length=MAX_VARIABLES, description="values for this call only (a scene "
                                                                   "change, a rating), over the options")


class MemoryUse(WireModel):
    count: int
    memory_ids: list[int]
    tokens: int


class ChatAssembleResult(AssembleResult):
    conversation_id: str
    memory: MemoryUse
    history_candidates: int = Field(description="messages offered to the history section")


def _conversation(c: Conversation) -> dict[str, Any]:
    return {"conversation_id": c.id, "project_id": c.project_id, "system_character_id": c.system_character_id,
            "user_character_id": c.user_character_id, "template_name": c.template, "options": c.options,
            "message_count": c.message_count, "created_at": c.created_at, "updated_at": c.updated_at}


def _message(m: StoredMessage) -> MessageWire:
    shown = display(m.content)
    return MessageWire(message_id=m.id, conversation_id=m.conversation_id, seq=m.seq, role=m.role,
                       kind=m.kind,
                       content=m.content, display_content=shown.content, has_thoughts=shown.has_thoughts,
                       has_reminder=shown.has_reminder, has_keyframe=shown.has_keyframe,
                       important=m.important,
                       created_at=m.created_at)


def _event(e: Event) -> EventWire:
    return EventWire(kind=e.kind, status=e.status, stored=e.stored, warning=e.warning)


def _memory_use(done: Assembled) -> MemoryUse:
    memory, tokens = done.memory_used()
    return MemoryUse(count=memory.count, memory_ids=list(memory.ids), tokens=tokens)


def register_characters(registry: Registry, chat: CharacterChat) -> None:
    @registry.method("chat:conversation:create", params=CreateParams, result=CreateResult,
                     summary="Start a conversation between two of the project's characters on a template.",
                     errors=(ProjectNotFound, CharacterNotFound, ProfileNotFound, InvalidParams))
    async def create(params: CreateParams, ctx: CallContext) -> CreateResult:
        try:
            # As the dispatcher binds params: strictly, by wire name ("20" is no integer).
            options = ConversationOptions.model_validate(params.options, strict=True, by_alias=True,
                                                         by_name=False)
        except ValidationError as exc:
            errors = describe_validation(exc)
            for error in errors:
                error["loc"] = ["options", *error["loc"]]
            raise InvalidParams("Invalid options", errors=errors) from None
        conv = await chat.create(params.project_id, params.system_character_id, params.user_character_id,
                                 params.template_name, options)
        return CreateResult(**_conversation(conv), ignored_options=ignored(params.options))

    @registry.method("chat:conversation:get", params=ConversationParams, result=GetResult,
                     summary="A conversation, its options and what its background work did.",
                     errors=(ConversationNotFound,))
    async def get(params: ConversationParams, ctx: CallContext) -> GetResult:
        conv = await chat.conversations.locate(params.conversation_id)
        events, done = chat.events(params.conversation_id)
        return GetResult(**_conversation(conv), background=[_event(e) for e in events], background_done=done)

    @registry.method("chat:conversation:list", params=ListParams, result=ListResult,
                     summary="The project's conversations, newest first.", errors=(ProjectNotFound,))
    async def list_(params: ListParams, ctx: CallContext) -> ListResult:
        found = await chat.conversations.list(params.project_id,
                                              system_character_id=params.system_character_id,
                                              user_character_id=params.user_character_id, limit=params.limit)
        return ListResult(conversations=[ConversationWire(**_conversation(c)) for c in found])

    @registry.method("chat:conversation:delete", params=ConversationParams, result=ConversationWire,
                     summary="Delete a conversation, its messages and its conversation-scoped memories "
                             "(the pair's memories stay).", errors=(ConversationNotFound,))
    async def delete(params: ConversationParams, ctx: CallContext) -> ConversationWire:
        return ConversationWire(**_conversation(await chat.delete(params.conversation_id)))

    @registry.method("chat:message:add", params=AddParams, result=AddResult,
                     summary="Add a message; reminders, keyframes and memory extraction follow the options.",
                     errors=(ConversationNotFound, ConversationFull, ChatMessageTooLong, CharacterNotFound,
                             InvalidParams))
    async def add(params: AddParams, ctx: CallContext) -> AddResult:
        added = await chat.add(params.conversation_id, params.role, params.content,
                               important=params.important)
        return AddResult(message=_message(added.message), keyframe_due=added.keyframe_due,
                         extraction_due=added.extraction_due)

    @registry.method("chat:message:list", params=MessagesParams, result=MessagesResult,
                     summary="Messages in order, each with its display text and flags.",
                     errors=(ConversationNotFound,))
    async def messages(params: MessagesParams, ctx: CallContext) -> MessagesResult:
        conv = await chat.conversations.locate(params.conversation_id)
        found = await chat.conversations.messages(conv.project_id, conv.id, after_seq=params.after_seq,
                                                  limit=params.limit)
        return MessagesResult(messages=[_message(m) for m in found])

    @registry.method("chat:message:important", params=ImportantParams, result=MessageWire,
                     summary="Mark a message important (or not): it outlives small talk when history is cut.",
                     errors=(ConversationNotFound, RecordNotFound))
    async def important(params: ImportantParams, ctx: CallContext) -> MessageWire:
        conv = await chat.conversations.locate(params.conversation_id)
        return _message(await chat.conversations.set_important(conv.project_id, conv.id, params.message_id,
                                                               params.important))

    @registry.method("chat:assemble", params=ChatAssembleParams, result=ChatAssembleResult,
                     summary="The prompt for the conversation's next model call, as context:assemble returns "
                             "it, with each history turn in its own role.",
                     errors=(ConversationNotFound, CharacterNotFound, ProfileNotFound, ProfileInvalid,
                             InvalidParams, InputTooLarge, Backpressure))
    async def assemble(params: ChatAssembleParams, ctx: CallContext) -> ChatAssembleResult:
        done = await chat.assemble(params.conversation_id, dict(params.variables))
        fields = result_fields(done.outcome)
        fields["messages"] = [MessageInfo(role=m.role, content=m.content) for m in done.messages]
        fields["warnings"] = [*done.outcome.assembly.warnings, *done.warnings]
        return ChatAssembleResult(
            **fields, conversation_id=params.conversation_id, memory=_memory_use(done),
            history_candidates=done.history_candidates)

