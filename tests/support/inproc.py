"""An in-process server on a real loopback socket, with test-only methods added."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from ipc.auth import origin_patterns
from ipc.channels.system import Limits, TokenizerDescription, register_system
from ipc.context import CallContext
from ipc.dispatch import Dispatcher
from ipc.errors import RpcError
from ipc.models import Ack, WireModel
from ipc.registry import Registry
from ipc.server import TransportLimits, WebSocketServer
from tests.support.spec_methods import add_spec_methods

TOKEN = "test-token-0123456789abcdef"
INSPECTOR_TOKEN = "inspector-token-0123456789abcdef"


class EchoParams(WireModel):
    text: str = ""
    count: int = 1


class EchoResult(WireModel):
    text: str


class SleepParams(WireModel):
    seconds: float = 0.05
    label: str = ""


class SleepResult(WireModel):
    label: str


class FailParams(WireModel):
    kind: str = "crash"


class NotifyParams(WireModel):
    times: int = 1


class Secret(RuntimeError):
    """Raised with a message that must never reach a client."""


class Conflict(RpcError):
    code = -32099
    data_code = "TEST_CONFLICT"
    message = "Test conflict"


def add_test_methods(registry: Registry, seen: list[str]) -> None:
    @registry.method("test:echo", params=EchoParams, result=EchoResult, summary="Echo text.")
    async def echo(params: EchoParams, ctx: CallContext) -> EchoResult:
        seen.append(f"echo:{params.text}")
        return EchoResult(text=params.text * params.count)

    @registry.method("test:sleep", params=SleepParams, result=SleepResult, summary="Sleep.")
    async def sleep(params: SleepParams, ctx: CallContext) -> SleepResult:
        seen.append(f"sleep-start:{params.label}")
        try:
            await asyncio.sleep(params.seconds)
        except asyncio.CancelledError:
            seen.append(f"sleep-cancelled:{params.label}")
            raise
        seen.append(f"sleep-end:{params.label}")
        return SleepResult(label=params.label)

    @registry.method("test:fail", params=FailParams, result=Ack, summary="Fail.",
                     errors=(Conflict,))
    async def fail(params: FailParams, ctx: CallContext) -> Ack:
        if params.kind == "conflict":
            raise Conflict(version=3)
        raise Secret("/home/writer/secret/chapter1.md: 林远 hid the key")

    @registry.method("test:notify", params=NotifyParams, result=Ack, summary="Notify me.")
    async def notify(params: NotifyParams, ctx: CallContext) -> Ack:
        for i in range(params.times):
            await ctx.peer.notify("$/progress", {"done": i + 1, "total": params.times})
        return Ack()


@dataclass
class InProcServer:
    server: WebSocketServer
    port: int
    seen: list[str]

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"


def build_test_registry(limits: TransportLimits, seen: list[str],
                  connections: Any = lambda: 0) -> Registry:
    """The system methods, the test methods and the JSON-RPC spec's example methods."""
    registry = Registry()
    register_system(
        registry, name="strata", version="test",
        tokenizer=TokenizerDescription(encoding="cl100k_base", source="bundled", exact=True),
        limits=Limits(max_frame_bytes=limits.max_frame_bytes,
                      max_in_flight=limits.session.max_in_flight,
                      max_batch=limits.session.max_batch, max_connections=limits.max_connections),
        connections=connections,
    )
    add_test_methods(registry, seen)
    add_spec_methods(registry)
    return registry


@asynccontextmanager
async def inproc_server(limits: TransportLimits | None = None, debug: bool = True,
                        **policy: Any) -> AsyncIterator[InProcServer]:
    seen: list[str] = []
    holder: list[WebSocketServer] = []
    limits = limits or TransportLimits()
    registry = build_test_registry(limits, seen, lambda: holder[0].connection_count)
    server = WebSocketServer(Dispatcher(registry), token=TOKEN, inspector_token=INSPECTOR_TOKEN,
                             origin_patterns=origin_patterns(**policy), limits=limits, debug=debug)
    holder.append(server)
    port = await server.start("127.0.0.1", 0)
    try:
        yield InProcServer(server=server, port=port, seen=seen)
    finally:
        await server.shutdown(grace=1.0)
