"""rpc.discover over the wire is a valid OpenRPC document listing every method."""

from __future__ import annotations

from pathlib import Path

import pytest

from main.config import Config
from main.stores import open_services
from main.wiring import build_registry
from tests.support.client import RpcClient
from tests.support.openrpc_schema import openrpc_validator


@pytest.fixture
async def discovered(rpc: RpcClient) -> dict[str, object]:
    """The OpenRPC document the module's server child answers."""
    document: dict[str, object] = await rpc.call("rpc.discover")
    return document


def test_meta_schema_rejects_a_broken_document() -> None:
    """The validator in use does reject documents that are not OpenRPC."""
    validator = openrpc_validator()
    assert not validator.is_valid({"openrpc": "1.3.2", "methods": []})
    assert not validator.is_valid({"openrpc": "1.3.2", "info": {"title": "x", "version": "1"},
                                   "methods": [{"name": "m", "params": "nope"}]})
    assert not validator.is_valid({"openrpc": "1.3.2", "info": {"title": "x", "version": "1"},
                                   "methods": [{"name": "m", "params": [
                                       {"name": "p", "schema": {"type": 5}}], "result": {
                                       "name": "r", "schema": {}}}]})


async def test_discover_is_valid_openrpc(discovered: dict[str, object]) -> None:
    """The document validates against the official OpenRPC meta-schema."""
    openrpc_validator().validate(discovered)


async def test_discover_lists_every_registered_method(discovered: dict[str, object],
                                                      tmp_path: Path) -> None:
    """Every method the composition root registers appears, with params and result schemas."""
    services = open_services(Config(data_dir=tmp_path / "registry"))
    try:
        registry = build_registry(Config(data_dir=tmp_path / "registry"), services, lambda: 0)
    finally:
        services.close()
    methods = discovered["methods"]
    assert isinstance(methods, list)
    assert sorted(m["name"] for m in methods) == sorted(m.name for m in registry)
    info = next(m for m in methods if m["name"] == "system:info")
    assert info["result"]["schema"] == {"$ref": "#/components/schemas/SystemInfo"}
    cancel = next(m for m in methods if m["name"] == "$/cancelRequest")
    assert cancel["params"][0]["name"] == "id"
    assert "result" not in cancel
