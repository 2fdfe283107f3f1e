"""The OpenRPC document built from a registry."""

from __future__ import annotations

from typing import Any, cast

from ipc.channels.context import register_context
from ipc.openrpc import openrpc_document
from ipc.registry import Registry
from ipc.server import TransportLimits
from services.assembly.profiles import BudgetProfiles
from services.assembly.service import ContextService
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


def test_context_results_describe_any_profile() -> None:
    """The context results are keyed by section id, not by the four novel layers: ``layers``,
    ``prefixHashes``, ``layerTexts`` and each ``arithmetic`` table are open objects of one value
    type, and every result carries ``profileId``, ``sections``, ``messages`` and ``reductions``;
    the document stays valid OpenRPC."""
    registry = Registry()
    # Building the document never calls the service: the channel only keeps them for its handlers.
    register_context(registry, cast(ContextService, object()), cast(BudgetProfiles, object()))
    document = openrpc_document(registry, title="strata", version="1")
    openrpc_validator().validate(document)
    schemas = document["components"]["schemas"]
    ref = "#/components/schemas/{}".format

    def keyed(schema: dict[str, Any], value: dict[str, Any]) -> None:
        assert schema["type"] == "object"
        assert "properties" not in schema
        assert schema["additionalProperties"] == value

    results = {m["name"]: m["result"]["schema"] for m in document["methods"]}
    assert results["context:assemble"] == {"$ref": ref("AssembleResult")}
    assert results["context:inspect"] == {"$ref": ref("InspectResult")}
    for name in ("AssembleResult", "InspectResult"):
        result = schemas[name]
        fields = result["properties"]
        keyed(fields["layers"], {"anyOf": [{"$ref": ref("RetrievedInfo")}, {"$ref": ref("LayerInfo")}]})
        keyed(fields["prefixHashes"], {"type": "string"})
        assert fields["profileId"]["type"] == "string"
        assert fields["sections"]["items"] == {"$ref": ref("SectionInfo")}
        assert fields["messages"]["items"] == {"$ref": ref("MessageInfo")}
        assert fields["reductions"]["items"] == {"$ref": ref("ReductionInfo")}
        assert {"profileId", "sections", "messages", "reductions", "layers", "prefixHashes"} <= set(
            result["required"])
    inspect = schemas["InspectResult"]["properties"]
    keyed(inspect["layerTexts"], {"type": "string"})
    assert inspect["arithmetic"] == {"$ref": ref("BudgetArithmetic")}
    for table in ("shares", "minimums", "used"):
        keyed(schemas["BudgetArithmetic"]["properties"][table], {"type": "number"})
    assert set(schemas["ReductionInfo"]["required"]) == {"section", "step", "tokensBefore", "tokensAfter",
                                                         "estimated"}
    assert set(schemas["SectionInfo"]["required"]) == {"id", "role", "tokens", "truncated", "items", "steps"}
    assert set(schemas["MessageInfo"]["required"]) == {"role", "content"}
