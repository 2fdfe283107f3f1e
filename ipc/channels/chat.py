"""chat:* methods: the app's command chat (seed 002), thin over :class:`ChatService`.

Sessions live in the main process's memory only; a restart forgets them all.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints

from ipc.channels.context import MessageInfo, ReductionInfo, SectionInfo, TokenizerUse
from ipc.channels.projects import ProjectId
from ipc.context import CallContext
from ipc.errors import (
    ChatBudgetTooSmall,
    ChatMessageTooLong,
    ChatSessionNotFound,
    ChatStateForbidden,
    InvalidParams,
    ProjectNotFound,
)
from ipc.models import Ack, OmitNone, WireModel
from ipc.registry import Registry
from services.chat.intents import Intent, IntentName, Resolved
from services.chat.service import ChatService, Turn
from services.tokenizer import TokenizerInfo

SessionId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
# Long enough for any message the store takes; the store's own limit answers CHAT_MESSAGE_TOO_LONG.
MAX_WIRE_MESSAGE = 65_536
Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_WIRE_MESSAGE, pattern=r"\S")]


class SubmitParams(WireModel):
    session_id: SessionId | None = Field(default=None, description="continue this session; none: a new one")
    project_id: ProjectId | None = Field(default=None, description="the project the chat is about")
    message: Text
    recent: int | None = Field(default=None, ge=6, le=8, description="user messages before the current one "
                                                                      "(default 8)")
    token_budget: int | None = Field(default=None, ge=64, le=1_000_000,
                                     description="tokens the whole prompt may take (default 4096)")
    context_budget: int | None = Field(default=None, ge=1, le=1_000_000,
                                       description="tokens the context block may take (default 1024)")


class NormalizedMessage(WireModel):
    original: str
    normalized: str


class ChatContextWire(WireModel):
    summary: str | None
    recent_user_messages: list[str]
    last_assistant_question: str | None


class ChatBudget(WireModel):
    token_budget: int
    context_budget: int
    total: int


class SubmitResult(WireModel):
    session_id: str
    message: NormalizedMessage
    context: ChatContextWire
    current_user_message: str
    prompt: str
    messages: list[MessageInfo]
    token_count: int
    stable_prefix_hash: str
    budget: ChatBudget
    sections: list[SectionInfo]
    reductions: list[ReductionInfo]
    tokenizer: TokenizerUse
    profile_id: str
    warnings: list[str]
    summary_source: Literal["client", "extractive"] | None = Field(
        description="who made the summary in use: a client's model, or the extractive fallback")
    summary_pending: bool = Field(description="a newer summary is being made; a later submit uses it")


class ReplyParams(WireModel):
    session_id: SessionId
    content: Text
    is_question: bool | None = Field(default=None, description="default: the reply ends with ? or ？")


class ReplyResult(WireModel):
    is_question: bool
    messages: int


class SessionParams(WireModel):
    session_id: SessionId


class StateMessage(WireModel):
    role: Literal["user", "assistant"]
    content: str
    original: str | None
    is_question: bool


class StateResult(WireModel):
    session_id: str
    project_id: str | None
    messages: list[StateMessage]
    summary: str | None
    summary_source: Literal["client", "extractive"] | None
    summary_pending: bool
    recorded: int


class IntentParam(WireModel):
    """The model's parsed intent; fields it added beyond these are ignored."""

    model_config = ConfigDict(extra="ignore")

    intent: IntentName
    number: int | None = Field(default=None, ge=0, le=1_000_000)
    name: Annotated[str, StringConstraints(max_length=200)] | None = None
    relative: Literal["next", "previous"] | None = None
    query: Annotated[str, StringConstraints(max_length=1000)] | None = None


class ResolveParams(WireModel):
    session_id: SessionId
    intent: IntentParam
    current_document_id: str | None = Field(default=None, min_length=1, max_length=1024,
                                            description="the open document, for next/previous")
    project_id: ProjectId | None = Field(default=None, description="default: the session's project")


class CandidateWire(WireModel):
    project_id: str
    document_id: str | None
    title: str | None
    score: float


class ResolveResult(OmitNone):
    outcome: str = Field(description="document, project, ambiguous, not_found, no_project, clarify, "
                                     "unsupported, search or create")
    reply: str | None = Field(default=None, description="what to tell the user (recorded as the "
                                                        "assistant's reply)")
    project_id: str | None = None
    document_id: str | None = None
    title: str | None = None
    name: str | None = None
    query: str | None = None
    candidates: list[CandidateWire] | None = None
    supported_intents: list[str] | None = None


def _resolve_result(resolved: Resolved) -> ResolveResult:
    return ResolveResult(
        outcome=resolved.outcome, reply=resolved.reply, project_id=resolved.project_id,
        document_id=resolved.document_id, title=resolved.title, name=resolved.name, query=resolved.query,
        candidates=[CandidateWire(project_id=c.project_id, document_id=c.document_id, title=c.title,
                                  score=c.score) for c in resolved.candidates] or None,
        supported_intents=list(resolved.supported_intents) or None)


def _submit_result(turn: Turn, tokenizer: TokenizerInfo, budgets: tuple[int, int]) -> SubmitResult:
    a = turn.assembly
    steps: dict[str, list[dict[str, object]]] = {}
    for r in a.reductions:
        steps.setdefault(r.section, []).append({"step": r.step, "tokens_before": r.tokens_before,
                                                "tokens_after": r.tokens_after, "estimated": r.estimated})
    return SubmitResult(
        session_id=turn.session_id,
        message=NormalizedMessage(original=turn.original, normalized=turn.normalized),
        context=ChatContextWire(summary=turn.context.summary,
                                recent_user_messages=list(turn.context.recent_user_messages),
                                last_assistant_question=turn.context.last_assistant_question),
        current_user_message=turn.context.current,
        prompt=a.prompt,
        messages=[MessageInfo(role=m.role, content=m.content) for m in a.messages("")],
        token_count=a.token_count,
        stable_prefix_hash=a.stable_prefix_hash,
        budget=ChatBudget(token_budget=budgets[0], context_budget=budgets[1], total=a.budget.total),
        sections=[SectionInfo.model_validate({"id": name, "role": layer.role, "tokens": layer.tokens,
                                              "truncated": layer.truncated, "items": layer.items,
                                              "steps": steps.get(name, [])})
                  for name, layer in a.layers.items()],
        reductions=[ReductionInfo(section=r.section, step=r.step, tokens_before=r.tokens_before,
                                  tokens_after=r.tokens_after, estimated=r.estimated) for r in a.reductions],
        tokenizer=TokenizerUse(encoding=tokenizer.encoding, exact=tokenizer.exact),
        profile_id=a.profile,
        warnings=list(turn.warnings),
        summary_source=turn.summary_source,
        summary_pending=turn.summary_pending,
    )


def register_chat(registry: Registry, chat: ChatService) -> None:
    @registry.method("chat:submit", params=SubmitParams, result=SubmitResult,
                     summary="Record a command-chat message (normalized first) in a new or continued "
                             "session and return the context block and prompt for the intent call.",
                     errors=(ChatSessionNotFound, ChatMessageTooLong, ChatBudgetTooSmall, ProjectNotFound,
                             InvalidParams))
    async def submit(params: SubmitParams, ctx: CallContext) -> SubmitResult:
        settings = chat.settings
        turn = await chat.submit(params.session_id, params.project_id, params.message, recent=params.recent,
                                 token_budget=params.token_budget, context_budget=params.context_budget,
                                 connection=ctx.peer.connection_id)
        budgets = (params.token_budget or settings.token_budget,
                   params.context_budget or settings.context_budget)
        return _submit_result(turn, chat.counter.info, budgets)

    @registry.method("chat:reply", params=ReplyParams, result=ReplyResult,
                     summary="Record the assistant's answer in a session (a question when it ends "
                             "with ? or ？, unless isQuestion says otherwise).",
                     errors=(ChatSessionNotFound, ChatMessageTooLong, InvalidParams))
    async def reply(params: ReplyParams, ctx: CallContext) -> ReplyResult:
        message = chat.reply(params.session_id, params.content, params.is_question,
                             connection=ctx.peer.connection_id)
        kept = len(chat.session(params.session_id).messages)
        return ReplyResult(is_question=message.is_question, messages=kept)

    @registry.method("chat:resolve", params=ResolveParams, result=ResolveResult,
                     summary="Turn the model's parsed intent into what to do: a document or project to "
                             "open, candidates when several fit, or a clarifying question when the intent "
                             "is unsupported but the conversation implies a target.",
                     errors=(ChatSessionNotFound, ProjectNotFound, InvalidParams))
    async def resolve(params: ResolveParams, ctx: CallContext) -> ResolveResult:
        intent = Intent(intent=params.intent.intent, number=params.intent.number, name=params.intent.name,
                        relative=params.intent.relative, query=params.intent.query)
        resolved = await chat.resolve(params.session_id, intent, params.current_document_id,
                                      params.project_id)
        return _resolve_result(resolved)

    @registry.method("chat:reset", params=SessionParams, result=Ack,
                     summary="Forget a session's messages and summary; its id stays usable.",
                     errors=(ChatSessionNotFound, InvalidParams))
    async def reset(params: SessionParams, ctx: CallContext) -> Ack:
        chat.reset(params.session_id)
        return Ack()

    @registry.method("chat:state", params=SessionParams, result=StateResult,
                     summary="Debug mode only: a session's messages, summary and summary status.",
                     errors=(ChatStateForbidden, ChatSessionNotFound, InvalidParams))
    async def state(params: SessionParams, ctx: CallContext) -> StateResult:
        if not ctx.debug:
            raise ChatStateForbidden()
        session = chat.session(params.session_id)
        source, pending = chat.summary_state(session.id)
        return StateResult(
            session_id=session.id, project_id=session.project_id,
            messages=[StateMessage(role=m.role, content=m.content, original=m.original,
                                   is_question=m.is_question) for m in session.messages],
            summary=session.summary, summary_source=source if session.summary is not None else None,
            summary_pending=pending, recorded=session.recorded)
