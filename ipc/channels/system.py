"""system:* and rpc.* methods: who the server is and what it speaks."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, RootModel

from ipc.completions import CAPABILITY, ClientCompletions
from ipc.context import CallContext
from ipc.models import Ack, NoParams, WireModel
from ipc.openrpc import openrpc_document
from ipc.registry import Registry
from ipc.session import CANCEL_METHOD, CancelParams


class TokenizerDescription(WireModel):
    encoding: str
    source: str
    exact: bool


class Limits(WireModel):
    max_frame_bytes: int
    max_in_flight: int
    max_batch: int
    max_connections: int


class SystemInfo(WireModel):
    name: str
    version: str
    pid: int
    debug: bool
    tokenizer: TokenizerDescription
    limits: Limits
    connections: int


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
) -> None:
    """Add system:info, system:subscribe, system:capabilities, rpc.discover and $/cancelRequest
    to ``registry``. Without ``completions`` the server asks no client for completions, so
    system:capabilities accepts none."""
    discovered: list[OpenRpcDocument] = []

    @registry.method("system:info", params=NoParams, result=SystemInfo,
                     summary="Name, version, tokenizer, limits and mode of this server.")
    async def system_info(params: NoParams, ctx: CallContext) -> SystemInfo:
        return SystemInfo(name=name, version=version, pid=os.getpid(), debug=ctx.debug,
                          tokenizer=tokenizer, limits=limits, connections=connections())

    @registry.method("rpc.discover", params=NoParams, result=OpenRpcDocument,
                     summary="The OpenRPC document of every method this server serves.")
    async def discover(params: NoParams, ctx: CallContext) -> OpenRpcDocument:
        if not discovered:  # the registry is complete once the server serves
            discovered.append(OpenRpcDocument(openrpc_document(registry, title=name, version=version)))
        return discovered[0]

    @registry.method("system:subscribe", params=SubscribeParams, result=Subscription,
                     summary="Choose the server notifications this connection receives "
                             "(progress: $/progress while indexing); replaces the previous choice.")
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
