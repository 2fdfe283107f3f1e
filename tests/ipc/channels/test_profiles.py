"""profile:* over the real registry, and context:assemble with a project profile."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipc.openrpc import openrpc_document
from ipc.registry import Registry
from services.profiles.plans import built_in_documents
from services.profiles.schema import json_schema
from tests.ipc.channels.conftest import Rpc, assert_documented

# The built-in profiles, the default first, as profile:list gives them.
BUILT_INS = list(built_in_documents())

# The module shares one event loop with its services (see conftest.services).
pytestmark = pytest.mark.asyncio(loop_scope="module")

UNKNOWN_PROJECT = "0000000000000000"


def doc(name: str, **fields: Any) -> dict[str, Any]:
    sections = fields.pop("sections", {"intro": {"order": 10, "content": ["Hello, ${who}."]}})
    variables = fields.pop("variables", {"who": {"default": "reader"}})
    return {"schema": "strata.profile/1", "name": name, **fields, "variables": variables,
            "sections": sections}


async def test_list_and_get_of_the_built_in_novel(rpc: Rpc, project_id: str) -> None:
    """profile:list starts with novel (builtIn, version 1); profile:get gives it as stored and resolved."""
    listed = await rpc.call("profile:list", {"projectId": project_id})
    assert listed["profiles"][0] == {"name": "novel", "description": listed["profiles"][0]["description"],
                                     "extends": None, "builtIn": True, "version": 1}
    got = await rpc.call("profile:get", {"projectId": project_id, "name": "novel"})
    assert set(got) == {"profile", "resolved", "version", "builtIn"}
    assert (got["version"], got["builtIn"], got["profile"]["name"]) == (1, True, "novel")
    assert list(got["resolved"]["sections"]) == ["rules", "settings", "retrieved", "immediate"]


async def test_put_get_validate_delete_round_trip(rpc: Rpc, project_id: str) -> None:
    """A profile is created at version 1, read back as sent, replaced at version 2, validated and deleted."""
    document = doc("greeting", description="one line")
    created = await rpc.call("profile:put", {"projectId": project_id, "name": "greeting",
                                             "profile": document})
    assert (created["profile"], created["version"], created["builtIn"]) == (document, 1, False)
    assert created["resolved"]["sections"] == document["sections"]
    listed = await rpc.call("profile:list", {"projectId": project_id})
    assert listed["profiles"][len(BUILT_INS):] == [
        {"name": "greeting", "description": "one line", "extends": None, "builtIn": False, "version": 1}]
    changed = doc("greeting", description="two")
    updated = await rpc.call("profile:put", {"projectId": project_id, "name": "greeting", "profile": changed,
                                             "version": 1})
    assert updated["version"] == 2
    assert await rpc.call("profile:get", {"projectId": project_id, "name": "greeting"}) == updated
    checked = await rpc.call("profile:validate", {"profile": changed, "projectId": project_id})
    assert checked == {"valid": True, "problems": [], "resolved": updated["resolved"]}
    assert await rpc.call("profile:delete", {"projectId": project_id, "name": "greeting", "version": 2}) \
        == {"ok": True}
    missing = await rpc.error("profile:get", {"projectId": project_id, "name": "greeting"})
    assert (missing["code"], missing["data"]) == (-32050, {"code": "PROFILE_NOT_FOUND"})


async def test_an_invalid_profile_is_profile_invalid_with_pointers(rpc: Rpc, project_id: str) -> None:
    """A profile object of the wrong shape reaches the service: PROFILE_INVALID with a JSON
    pointer per problem, not INVALID_PARAMS; profile:validate reports the same problems."""
    bad = doc("bad", sections={"a": {"order": "first", "source": "tarot"}, "b": {"order": 2, "budget": 5}})
    error = await rpc.error("profile:put", {"projectId": project_id, "name": "bad", "profile": bad})
    assert (error["code"], error["data"]["code"]) == (-32051, "PROFILE_INVALID")
    paths = [p["path"] for p in error["data"]["problems"]]
    assert {"/sections/a/order", "/sections/b/budget"} <= set(paths)
    assert all(set(p) == {"path", "message"} for p in error["data"]["problems"])
    checked = await rpc.call("profile:validate", {"profile": bad})
    assert (checked["valid"], [p["path"] for p in checked["problems"]]) == (False, paths)
    assert "resolved" in checked
    assert checked["resolved"] is None
    not_an_object = await rpc.error("profile:put", {"projectId": project_id, "name": "bad", "profile": "{}"})
    assert not_an_object["data"]["code"] == "INVALID_PARAMS"


async def test_conflict_read_only_and_limits(rpc: Rpc, project_id: str) -> None:
    """A second create or a stale version is PROFILE_CONFLICT with currentVersion; a built-in's
    name is PROFILE_READ_ONLY; a document over 256 KiB is INVALID_PARAMS with the limit."""
    params = {"projectId": project_id, "name": "dup", "profile": doc("dup")}
    await rpc.call("profile:put", params)
    for extra in ({}, {"version": 7}):
        error = await rpc.error("profile:put", {**params, **extra})
        assert (error["code"], error["data"]) == (-32052, {"code": "PROFILE_CONFLICT", "currentVersion": 1})
    for method, call in (("profile:put", {"profile": doc("novel")}), ("profile:delete", {})):
        error = await rpc.error(method, {"projectId": project_id, "name": "novel", **call})
        assert (error["code"], error["data"]["code"]) == (-32053, "PROFILE_READ_ONLY")
    big = doc("big", description="x" * 262_144)
    error = await rpc.error("profile:put", {"projectId": project_id, "name": "big", "profile": big})
    assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    assert error["data"]["limit"] == 262_144


async def test_a_delete_while_extended_names_the_child(rpc: Rpc, project_id: str) -> None:
    """profile:delete of a parent answers PROFILE_INVALID whose problem names the profile extending it."""
    await rpc.call("profile:put", {"projectId": project_id, "name": "parent", "profile": doc("parent")})
    child = doc("kid", extends="parent", sections={"more": {"order": 20, "content": ["${who}"]}},
                variables={})
    await rpc.call("profile:put", {"projectId": project_id, "name": "kid", "profile": child})
    error = await rpc.error("profile:delete", {"projectId": project_id, "name": "parent"})
    assert error["data"]["code"] == "PROFILE_INVALID"
    assert [p["profile"] for p in error["data"]["problems"]] == ["kid"]


async def test_assemble_with_a_project_profile(rpc: Rpc, project_id: str) -> None:
    """context:assemble runs a saved profile by profileId, without a document when it has no window;
    an unknown profileId is PROFILE_NOT_FOUND."""
    ask = {"order": 20, "source": "instruction", "format": {"header": "[Ask]"}}
    document = doc("hello", sections={"intro": {"order": 10, "content": ["Hello, ${who}."]}, "ask": ask})
    await rpc.call("profile:put", {"projectId": project_id, "name": "hello", "profile": document})
    result = await rpc.call("context:assemble", {"projectId": project_id, "profileId": "hello",
                                                 "variables": {"who": "Lin"}, "additionalInput": "Go on."})
    assert (result["prompt"], result["profileId"]) == ("Hello, Lin.\n\n[Ask]\nGo on.", "hello")
    error = await rpc.error("context:assemble", {"projectId": project_id, "profileId": "nobody"})
    assert (error["code"], error["data"]["code"]) == (-32050, "PROFILE_NOT_FOUND")


@pytest.mark.parametrize(("method", "params"), [
    ("profile:list", {}), ("profile:get", {"name": "novel"}),
    ("profile:put", {"name": "a", "profile": doc("a")}), ("profile:delete", {"name": "a"}),
    ("profile:validate", {"profile": doc("a")}),
])
async def test_unknown_project_is_project_not_found(rpc: Rpc, method: str, params: dict[str, Any]) -> None:
    """Every profile method answers -32010 PROJECT_NOT_FOUND for an unknown project."""
    error = await rpc.error(method, {"projectId": UNKNOWN_PROJECT, **params})
    assert (error["code"], error["data"]) == (-32010, {"code": "PROJECT_NOT_FOUND"})


async def test_discover_publishes_the_profile_schema(registry: Registry) -> None:
    """rpc.discover gives the profile params and results the ProfileDocument schema: the same
    schema as services.profiles.schema.json_schema(), its parts as components."""
    document = openrpc_document(registry, title="strata", version="1")
    methods = {m["name"]: m for m in document["methods"]}
    ref = {"$ref": "#/components/schemas/ProfileDocument", "title": "Profile"}
    assert [p["schema"] for p in methods["profile:put"]["params"] if p["name"] == "profile"] == [ref]
    assert next(p for p in methods["profile:validate"]["params"] if p["name"] == "profile")["required"]
    published = json.loads(json.dumps(json_schema()).replace("#/$defs/", "#/components/schemas/"))
    schemas = document["components"]["schemas"]
    for name, schema in published.pop("$defs").items():
        assert schemas[name] == schema
    assert schemas["ProfileDocument"] == published
    assert schemas["ProfileResult"]["properties"]["resolved"]["$ref"] == ref["$ref"]


async def test_methods_and_their_errors_are_documented(registry: Registry) -> None:
    """docs/protocol.md lists every profile:* method and each error code they declare."""
    assert_documented(registry, ("profile:",))
