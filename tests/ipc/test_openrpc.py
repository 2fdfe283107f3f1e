"""The OpenRPC document built from a registry."""

from __future__ import annotations

from ipc.openrpc import openrpc_document
from ipc.server import TransportLimits
from tests.support.inproc import build_test_registry
from tests.support.openrpc_schema import openrpc_validator


def test_document_is_valid_and_complete() -> None:
    """Each method has its params, a result reference and its declared errors."""
    registry = build_test_registry(TransportLimits(), [])
    document = openrpc_document(registry, title="strata", version="1")
    openrpc_validator().validate(document)
    by_name = {m["name"]: m for m in document["methods"]}
    assert set(by_name) == {m.name for m in registry}
    echo = by_name["test:echo"]
    assert [p["name"] for p in echo["params"]] == ["text", "count"]
    assert echo["params"][1] == {"name": "count", "required": False,
                                 "schema": {"default": 1, "title": "Count", "type": "integer"}}
    assert echo["result"]["schema"] == {"$ref": "#/components/schemas/EchoResult"}
    assert document["components"]["schemas"]["EchoResult"]["properties"]["text"]["type"] == "string"
    assert by_name["test:fail"]["errors"] == [
        {"code": -32099, "message": "Test conflict", "data": {"code": "TEST_CONFLICT"}}]
    subtract = by_name["subtract"]
    assert {p["name"]: p["required"] for p in subtract["params"]} == {"minuend": True,
                                                                     "subtrahend": True}
