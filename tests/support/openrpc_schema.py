"""The official OpenRPC meta-schema, validated fully offline.

Both schemas come from npm packages that the test command installs under
renderer-stub/node_modules: @open-rpc/meta-schema, and the JSON Schema
meta-schema it references, @json-schema-tools/meta-schema.
"""

from __future__ import annotations

import functools
import json
import subprocess
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from tests.support.process import REPO

_MODULES = REPO / "renderer-stub" / "node_modules"
_DUMP = "process.stdout.write(JSON.stringify(require('@open-rpc/meta-schema').openrpcDocument))"
_JSON_SCHEMA_TOOLS = "https://meta.json-schema.tools"


@functools.cache
def openrpc_meta_schema() -> dict[str, Any]:
    out = subprocess.run(["node", "-e", _DUMP], cwd=REPO / "renderer-stub", check=True,
                         capture_output=True, text=True, timeout=60)
    schema: dict[str, Any] = json.loads(out.stdout)
    return schema


@functools.cache
def openrpc_validator() -> jsonschema.Draft7Validator:
    """A validator that resolves every reference from the installed packages."""
    tools = json.loads((_MODULES / "@json-schema-tools/meta-schema/schema.json").read_text())
    resource = Resource.from_contents(tools, default_specification=DRAFT7)
    registry: Registry[Any] = Registry().with_resources(
        [(_JSON_SCHEMA_TOOLS, resource), (_JSON_SCHEMA_TOOLS + "/", resource)])
    return jsonschema.Draft7Validator(openrpc_meta_schema(), registry=registry)
