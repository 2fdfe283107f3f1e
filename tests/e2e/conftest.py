"""Fixtures of the end-to-end tests: one real server child per module, and connections to it.

``proc`` is a ``python -m main serve`` child on a fresh data dir, shared by
the tests of one module. A module whose server needs flags names them with
a marker, for example ``pytestmark = pytest.mark.server_flags("--debug")``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.support.client import RpcClient, connected
from tests.support.process import ServerProcess, serving


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "server_flags(*flags): extra `python -m main serve` flags for the module's `proc`")


@pytest.fixture(scope="module")
def proc(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The module's server child, with the flags of its ``server_flags`` marker."""
    marker = request.node.get_closest_marker("server_flags")
    flags = [str(flag) for flag in marker.args] if marker else []
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    with serving(tmp_path_factory.mktemp(name) / "data", *flags) as running:
        yield running


@pytest.fixture
async def rpc(proc: ServerProcess) -> AsyncIterator[RpcClient]:
    """A renderer's connection to ``proc`` (the client token)."""
    async with connected(proc.url, proc.token) as client:
        yield client
