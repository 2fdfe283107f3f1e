"""The OpenRPC 1.x document of every registered method, built from its models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ipc.errors import RpcError
from ipc.registry import Method, Registry

OPENRPC_VERSION = "1.3.2"
_REF = "#/components/schemas/{model}"


def _schema(model: type[BaseModel], mode: str, schemas: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, ref_template=_REF, mode=mode)  # type: ignore[arg-type]
    schemas.update(schema.pop("$defs", {}))
    return schema


def _error(err: type[RpcError]) -> dict[str, Any]:
    return {"code": err.code, "message": err.message, "data": {"code": err.data_code}}


def _method(method: Method, schemas: dict[str, Any]) -> dict[str, Any]:
    params_schema = _schema(method.params, "validation", schemas)
    required = set(params_schema.get("required", []))
    entry: dict[str, Any] = {
        "name": method.name,
        "summary": method.summary,
        "paramStructure": "either",
        "params": [
            {"name": name, "required": name in required, "schema": prop}
            for name, prop in params_schema.get("properties", {}).items()
        ],
    }
    if not method.notification:
        result_name = method.result.__name__
        schemas[result_name] = _schema(method.result, "serialization", schemas)
        entry["result"] = {"name": result_name, "schema": {"$ref": _REF.format(model=result_name)}}
    if method.errors:
        entry["errors"] = [_error(e) for e in method.errors]
    return entry


def openrpc_document(registry: Registry, *, title: str, version: str) -> dict[str, Any]:
    """Every method with params and result JSON Schemas generated from pydantic."""
    schemas: dict[str, Any] = {}
    methods = [_method(m, schemas) for m in registry]
    return {
        "openrpc": OPENRPC_VERSION,
        "info": {"title": title, "version": version},
        "methods": methods,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }
