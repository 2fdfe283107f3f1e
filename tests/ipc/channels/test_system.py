"""system:capabilities: a client declares it can run completions, over an in-memory session."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ipc.channels.system import Limits, TokenizerDescription, register_system
from ipc.completions import ClientCompletions
from ipc.dispatch import Dispatcher
from ipc.registry import Registry
from ipc.session import Session
from services.summaries.seam import CompletionRequest, CompletionUnavailable, messages

REQUEST = CompletionRequest(purpose="chat.summary", messages=messages([("user", "x")]), max_tokens=50)


def _registry(completions: ClientCompletions | None) -> Registry:
    registry = Registry()
    register_system(registry, name="strata", version="test",
                    tokenizer=TokenizerDescription(encoding="cl100k_base", source="bundled", exact=True),
                    limits=Limits(max_frame_bytes=1, max_in_flight=1, max_batch=1, max_connections=1),
                    connections=lambda: 1, completions=completions)
    return registry


class Connection:
    """One in-memory connection: a Session whose sent frames are kept, parsed."""

    def __init__(self, registry: Registry, connection_id: str) -> None:
        self.sent: list[Any] = []

        async def send(text: str) -> None:
            self.sent.append(json.loads(text))

        self.session = Session(Dispatcher(registry), send, connection_id=connection_id)
        self._ids = 0

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        """The reply to one call."""
        self._ids += 1
        await self.session.receive(json.dumps({"jsonrpc": "2.0", "method": method, "params": params,
                                               "id": self._ids}))
        for _ in range(500):
            for message in self.sent:
                if message.get("id") == self._ids and "method" not in message:
                    reply: dict[str, Any] = message
                    return reply
            await asyncio.sleep(0.01)
        raise AssertionError("no reply")

    async def asked(self) -> dict[str, Any]:
        """The first server-to-client llm:complete request this connection was sent."""
        for _ in range(500):
            for message in self.sent:
                if message.get("method") == "llm:complete":
                    request: dict[str, Any] = message
                    return request
            await asyncio.sleep(0.01)
        raise AssertionError("nothing asked")


async def test_declaring_completions_registers_the_connection() -> None:
    """{completions: true} answers {capabilities: ["completions"]}, records it on the session and
    makes the connection the one asked for completions; it answers through its own connection."""
    completions = ClientCompletions()
    registry = _registry(completions)
    client = Connection(registry, "c1")
    reply = await client.call("system:capabilities", {"completions": True})
    assert reply["result"] == {"capabilities": ["completions"]}
    assert client.session.capabilities == {"completions"}
    assert completions.connection_ids == ["c1"]
    pending = asyncio.ensure_future(completions.complete(REQUEST))
    asked = await client.asked()
    await client.session.receive(json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": "sum"}))
    assert await pending == "sum"


async def test_a_new_declaration_replaces_the_previous_one() -> None:
    """{completions: false} withdraws the connection: capabilities [], no longer asked."""
    completions = ClientCompletions()
    client = Connection(_registry(completions), "c1")
    await client.call("system:capabilities", {"completions": True})
    reply = await client.call("system:capabilities", {"completions": False})
    assert reply["result"] == {"capabilities": []}
    assert client.session.capabilities == frozenset()
    assert completions.connection_ids == []
    with pytest.raises(CompletionUnavailable) as raised:
        await completions.complete(REQUEST)
    assert raised.value.reason == "no_client"


async def test_the_declared_timeout_bounds_the_wait() -> None:
    """completionTimeoutMs is how long the server waits for that client's answer."""
    completions = ClientCompletions(timeout=60)
    client = Connection(_registry(completions), "c1")
    await client.call("system:capabilities", {"completions": True, "completionTimeoutMs": 1000})
    with pytest.raises(CompletionUnavailable) as raised:
        await asyncio.wait_for(completions.complete(REQUEST), 30)
    assert raised.value.reason == "timeout"


async def test_a_closed_connection_is_forgotten() -> None:
    """When a declared connection closes, the next completion asks the other capable client."""
    completions = ClientCompletions()
    registry = _registry(completions)
    first, second = Connection(registry, "c1"), Connection(registry, "c2")
    await first.call("system:capabilities", {"completions": True})
    await second.call("system:capabilities", {"completions": True})
    await second.session.close()
    assert completions.connection_ids == ["c1"]


@pytest.mark.parametrize("params", [{}, {"completions": "perhaps"},
                                    {"completions": True, "completionTimeoutMs": 999},
                                    {"completions": True, "completionTimeoutMs": 120_001},
                                    {"completions": True, "completionTimeoutMs": 1500.5},
                                    {"completions": True, "extra": 1}])
async def test_params_are_checked(params: dict[str, Any]) -> None:
    """completions is a required boolean, completionTimeoutMs an integer of 1000..120000, and
    nothing else is accepted: -32602, and nothing is registered."""
    completions = ClientCompletions()
    client = Connection(_registry(completions), "c1")
    reply = await client.call("system:capabilities", params)
    assert (reply["error"]["code"], reply["error"]["data"]["code"]) == (-32602, "INVALID_PARAMS")
    assert completions.connection_ids == []


async def test_without_a_completer_nothing_is_accepted() -> None:
    """A server built without ClientCompletions serves the method but accepts no capability."""
    client = Connection(_registry(None), "c1")
    reply = await client.call("system:capabilities", {"completions": True})
    assert reply["result"] == {"capabilities": []}
    assert client.session.capabilities == frozenset()


def test_the_method_is_described() -> None:
    """The registry describes system:capabilities with the summary the OpenRPC document shows."""
    method = _registry(None).get("system:capabilities")
    assert method is not None
    assert method.summary == ("Declare what this client can do for the server (completions: it answers "
                              "llm:complete requests); replaces the previous declaration.")
    assert method.param_names == ("completions", "completionTimeoutMs")
