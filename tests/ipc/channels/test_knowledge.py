"""constraints:* and kg:entity:* over the real registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ipc.registry import Registry
from tests.ipc.channels.conftest import Rpc, assert_documented
from tests.support.projects import make_folder

# The module shares one event loop with its services (see conftest.services).
pytestmark = pytest.mark.asyncio(loop_scope="module")

KNOWLEDGE_METHODS = {
    "constraints:list": {}, "constraints:create": {"kind": "plot", "text": "x"},
    "constraints:update": {"id": 1, "text": "x"}, "constraints:delete": {"id": 1},
    "kg:entity:list": {}, "kg:entity:upsert": {"kind": "character", "name": "x"},
    "kg:entity:delete": {"id": 1},
}


async def _other_project(rpc: Rpc, tmp_path: Path) -> str:
    result = await rpc.call("project:open", {"path": str(make_folder(tmp_path / "other"))})
    project_id: str = result["project"]["id"]
    return project_id


async def test_constraint_crud(rpc: Rpc, project_id: str) -> None:
    """create -> list -> update (versioned) -> delete, records in camelCase with id and version."""
    params = {"projectId": project_id, "kind": "narrative", "text": "严格第一人称叙述", "priority": 3}
    created = (await rpc.call("constraints:create", params))["constraint"]
    assert set(created) == {"id", "projectId", "kind", "text", "source", "priority", "version",
                            "createdAt", "updatedAt"}
    assert (created["projectId"], created["source"], created["version"]) == (project_id, "user", 1)
    listed = await rpc.call("constraints:list", {"projectId": project_id})
    assert listed == {"constraints": [created]}
    updated = (await rpc.call("constraints:update", {
        "projectId": project_id, "id": created["id"], "version": 1, "text": "第一人称"}))["constraint"]
    assert (updated["text"], updated["priority"], updated["version"]) == ("第一人称", 3, 2)
    stale = await rpc.error("constraints:update", {"projectId": project_id, "id": created["id"],
                                                   "version": 1, "priority": 0})
    assert (stale["code"], stale["data"]) == (-32015, {"code": "RECORD_VERSION_CONFLICT",
                                                       "currentVersion": 2})
    assert await rpc.call("constraints:delete", {"projectId": project_id, "id": created["id"]}) \
        == {"ok": True}
    assert await rpc.call("constraints:list", {"projectId": project_id}) == {"constraints": []}


async def test_constraints_limit_at_501(rpc: Rpc, project_id: str) -> None:
    """The 501st constraints:create answers -32016 CONSTRAINTS_LIMIT with data.limit = 500."""
    for i in range(500):
        await rpc.call("constraints:create", {"projectId": project_id, "kind": "plot", "text": f"r{i}"})
    error = await rpc.error("constraints:create", {"projectId": project_id, "kind": "plot",
                                                   "text": "one too many"})
    assert (error["code"], error["data"]) == (-32016, {"code": "CONSTRAINTS_LIMIT", "limit": 500})


async def test_cross_project_ids_are_record_not_found(rpc: Rpc, project_id: str,
                                                      tmp_path: Path) -> None:
    """Another project's constraint or entity id answers -32014 RECORD_NOT_FOUND, unchanged."""
    other = await _other_project(rpc, tmp_path)
    theirs = (await rpc.call("constraints:create", {"projectId": other, "kind": "plot",
                                                    "text": "theirs"}))["constraint"]
    entity = (await rpc.call("kg:entity:upsert", {"projectId": other, "kind": "character",
                                                  "name": "林远"}))["entity"]
    for method, params in (("constraints:update", {"id": theirs["id"], "text": "mine"}),
                           ("constraints:delete", {"id": theirs["id"]}),
                           ("kg:entity:upsert", {"id": entity["id"], "kind": "character",
                                                 "name": "x"}),
                           ("kg:entity:delete", {"id": entity["id"]})):
        error = await rpc.error(method, {"projectId": project_id, **params})
        assert (error["code"], error["data"]) == (-32014, {"code": "RECORD_NOT_FOUND"})
    assert (await rpc.call("constraints:list", {"projectId": other}))["constraints"] == [theirs]
    assert (await rpc.call("kg:entity:list", {"projectId": other}))["entities"] == [entity]


@pytest.mark.parametrize("params", [
    {"kind": "mood", "text": "x"}, {"kind": "plot", "text": "x" * 2001}, {"kind": "plot"},
    {"kind": "plot", "text": "x", "source": "ai"}, {"kind": "plot", "text": "   "},
])
async def test_create_params_are_checked(rpc: Rpc, project_id: str, params: dict[str, Any]) -> None:
    """Unknown kinds or sources, text over 2000 chars, blank or missing text are -32602."""
    error = await rpc.error("constraints:create", {"projectId": project_id, **params})
    assert error["data"]["code"] == "INVALID_PARAMS"
    assert "x" * 50 not in str(error)


async def test_kg_entities(rpc: Rpc, project_id: str) -> None:
    """upsert creates then updates by (kind, name); list filters by kind; delete acks."""
    first = await rpc.call("kg:entity:upsert", {"projectId": project_id, "kind": "character",
                                                "name": "林远", "aliases": ["阿远"]})
    assert first["created"] is True
    assert set(first["entity"]) == {"id", "projectId", "kind", "name", "aliases", "description",
                                    "version", "updatedAt"}
    second = await rpc.call("kg:entity:upsert", {"projectId": project_id, "kind": "character",
                                                 "name": "林远", "description": "冷静"})
    assert (second["created"], second["entity"]["id"], second["entity"]["aliases"],
            second["entity"]["version"]) == (False, first["entity"]["id"], ["阿远"], 2)
    await rpc.call("kg:entity:upsert", {"projectId": project_id, "kind": "location", "name": "青城"})
    places = await rpc.call("kg:entity:list", {"projectId": project_id, "kind": "location"})
    assert [e["name"] for e in places["entities"]] == ["青城"]
    assert await rpc.call("kg:entity:delete", {"projectId": project_id,
                                               "id": first["entity"]["id"]}) == {"ok": True}


@pytest.mark.parametrize(("method", "params"), KNOWLEDGE_METHODS.items())
async def test_unknown_project_is_project_not_found(rpc: Rpc, method: str,
                                                    params: dict[str, Any]) -> None:
    """Every constraints and kg method answers -32010 PROJECT_NOT_FOUND for an unknown project."""
    error = await rpc.error(method, {"projectId": "0000000000000000", **params})
    assert (error["code"], error["data"]) == (-32010, {"code": "PROJECT_NOT_FOUND"})


async def test_methods_and_their_errors_are_documented(registry: Registry) -> None:
    """docs/protocol.md lists every constraints:* and kg:* method and each error code they declare."""
    assert_documented(registry, ("constraints:", "kg:"))
