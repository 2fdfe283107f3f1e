"""The real registry (main.wiring.build_registry) behind a Dispatcher, and a folder opened as a project."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ipc.context import CallContext, Peer
from ipc.dispatch import Dispatcher
from ipc.protocol import Call
from ipc.registry import Registry
from main.config import Config
from main.stores import Services, open_services
from main.wiring import build_registry
from tests.support.projects import make_folder

CTX = CallContext(peer=Peer(connection_id="channel-test"))
PROTOCOL_DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def documented(prefixes: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """Methods with a row in docs/protocol.md starting with ``prefixes``, and every documented code."""
    text = PROTOCOL_DOC.read_text(encoding="utf-8")
    methods = {m for m in re.findall(r"^\| `([^`]+)` \|", text, re.MULTILINE) if m.startswith(prefixes)}
    codes = set(re.findall(r"^\| -?\d+ \| `([A-Z_]+)` \|", text, re.MULTILINE))
    return methods, codes


def assert_documented(registry: Registry, prefixes: tuple[str, ...]) -> None:
    """Every registered method with these prefixes, and every error it declares, is in the docs."""
    methods, codes = documented(prefixes)
    registered = [m for m in registry if m.name.startswith(prefixes)]
    assert methods == {m.name for m in registered}
    assert {e.data_code for m in registered for e in m.errors} <= codes


class Rpc:
    """Calls methods through the dispatcher exactly as a connection would, by name and by JSON."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    async def reply(self, method: str, params: Any = None) -> dict[str, Any]:
        text = await self.dispatcher.dispatch(Call(method, params, 1), CTX)
        assert text is not None
        reply: dict[str, Any] = json.loads(text)
        return reply

    async def call(self, method: str, params: Any = None) -> Any:
        """The result; fails the test if the reply is an error."""
        reply = await self.reply(method, params)
        assert "error" not in reply, reply
        return reply["result"]

    async def error(self, method: str, params: Any = None) -> dict[str, Any]:
        """The error object; fails the test if the call succeeded."""
        reply = await self.reply(method, params)
        assert "error" in reply, reply
        error: dict[str, Any] = reply["error"]
        return error


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def services(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Config, Services]]:
    """The app's services for one test module. The module's tests share one event loop (its
    ``pytestmark``): retrieval keeps per-project workers on the loop that opened the project."""
    config = Config(data_dir=tmp_path_factory.mktemp("data"))
    opened = await asyncio.to_thread(open_services, config)
    try:
        yield config, opened
    finally:
        await opened.aclose()


@pytest.fixture(scope="module")
def registry(services: tuple[Config, Services]) -> Registry:
    config, opened = services
    return build_registry(config, opened, lambda: 0)


@pytest.fixture
def rpc(registry: Registry) -> Rpc:
    return Rpc(Dispatcher(registry))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path / "novel")


@pytest_asyncio.fixture(loop_scope="module")
async def project_id(rpc: Rpc, folder: Path) -> str:
    result = await rpc.call("project:open", {"path": str(folder)})
    project_id: str = result["project"]["id"]
    return project_id
