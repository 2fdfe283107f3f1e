"""memory:semantic:* and memory:episodic:* over the real registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ipc.registry import Registry
from tests.ipc.channels.conftest import Rpc, assert_documented
from tests.support.projects import make_folder

# The module shares one event loop with its services (see conftest.services).
pytestmark = pytest.mark.asyncio(loop_scope="module")

MEMORY_METHODS = {
    "memory:semantic:list": {}, "memory:semantic:upsert": {"text": "x"},
    "memory:semantic:delete": {"id": 1}, "memory:episodic:add": {"output": "x"},
    "memory:episodic:list": {}, "memory:episodic:delete": {"id": 1},
}


async def test_semantic_rules(rpc: Rpc, project_id: str) -> None:
    """upsert creates, confirms by id with a version, lists most confident first, filters, deletes."""
    made = await rpc.call("memory:semantic:upsert", {"projectId": project_id, "text": "动作场景偏好短句",
                                                     "category": "style", "confidence": 0.8})
    assert made["created"] is True
    rule = made["rule"]
    assert set(rule) == {"id", "projectId", "text", "category", "confidence", "confirmed", "version",
                         "updatedAt"}
    await rpc.call("memory:semantic:upsert", {"projectId": project_id, "text": "少用感叹号",
                                              "confidence": 0.3})
    confirmed = await rpc.call("memory:semantic:upsert", {"projectId": project_id, "id": rule["id"],
                                                          "version": 1, "confirmed": True})
    assert (confirmed["created"], confirmed["rule"]["confirmed"], confirmed["rule"]["version"]) == (
        False, True, 2)
    every = await rpc.call("memory:semantic:list", {"projectId": project_id})
    assert [r["confidence"] for r in every["rules"]] == [0.8, 0.3]
    only = await rpc.call("memory:semantic:list", {"projectId": project_id, "confirmedOnly": True})
    assert [r["id"] for r in only["rules"]] == [rule["id"]]
    assert await rpc.call("memory:semantic:delete", {"projectId": project_id, "id": rule["id"]}) \
        == {"ok": True}


@pytest.mark.parametrize("params", [{"text": "x", "confidence": 2}, {"text": "x" * 2001},
                                    {"text": "x", "confirmed": "yes please"}, {"category": "c"}])
async def test_semantic_params_are_checked(rpc: Rpc, project_id: str, params: dict[str, Any]) -> None:
    """Confidence outside 0..1, text over 2000 chars, non-boolean confirmed, no text nor id: -32602."""
    error = await rpc.error("memory:semantic:upsert", {"projectId": project_id, **params})
    assert error["data"]["code"] == "INVALID_PARAMS"


async def test_episodes(rpc: Rpc, project_id: str) -> None:
    """add returns the episode; list is newest first with a limit; delete acks."""
    first = (await rpc.call("memory:episodic:add", {
        "projectId": project_id, "instruction": "续写", "output": "林远推开门。",
        "documentId": "第一章.md", "skillId": "continue"}))["episode"]
    assert set(first) == {"id", "projectId", "documentId", "skillId", "instruction", "output",
                          "createdAt"}
    second = (await rpc.call("memory:episodic:add", {"projectId": project_id,
                                                     "output": "她笑了。"}))["episode"]
    listed = await rpc.call("memory:episodic:list", {"projectId": project_id, "limit": 1})
    assert [e["id"] for e in listed["episodes"]] == [second["id"]]
    by_doc = await rpc.call("memory:episodic:list", {"projectId": project_id, "documentId": "第一章.md"})
    assert [e["id"] for e in by_doc["episodes"]] == [first["id"]]
    assert await rpc.call("memory:episodic:delete", {"projectId": project_id, "id": first["id"]}) \
        == {"ok": True}


async def test_episode_document_ids_are_scoped(rpc: Rpc, project_id: str) -> None:
    """An episode's documentId that leaves the folder is -32012; a limit over 200 is -32602."""
    error = await rpc.error("memory:episodic:add", {"projectId": project_id, "output": "x",
                                                    "documentId": "../x.md"})
    assert error["data"]["code"] == "PROJECT_SCOPE_VIOLATION"
    error = await rpc.error("memory:episodic:list", {"projectId": project_id, "limit": 201})
    assert error["data"]["code"] == "INVALID_PARAMS"


async def test_cross_project_ids_are_record_not_found(rpc: Rpc, project_id: str,
                                                      tmp_path: Path) -> None:
    """Another project's rule or episode id answers -32014 RECORD_NOT_FOUND."""
    other = (await rpc.call("project:open", {"path": str(make_folder(tmp_path / "o"))}))["project"]["id"]
    rule = (await rpc.call("memory:semantic:upsert", {"projectId": other, "text": "x"}))["rule"]
    episode = (await rpc.call("memory:episodic:add", {"projectId": other, "output": "x"}))["episode"]
    for method, params in (("memory:semantic:upsert", {"id": rule["id"], "confirmed": True}),
                           ("memory:semantic:delete", {"id": rule["id"]}),
                           ("memory:episodic:delete", {"id": episode["id"]})):
        error = await rpc.error(method, {"projectId": project_id, **params})
        assert (error["code"], error["data"]) == (-32014, {"code": "RECORD_NOT_FOUND"})
    assert (await rpc.call("memory:episodic:list", {"projectId": project_id}))["episodes"] == []


@pytest.mark.parametrize(("method", "params"), MEMORY_METHODS.items())
async def test_unknown_project_is_project_not_found(rpc: Rpc, method: str,
                                                    params: dict[str, Any]) -> None:
    """Every memory method answers -32010 PROJECT_NOT_FOUND for an unknown project."""
    error = await rpc.error(method, {"projectId": "0000000000000000", **params})
    assert (error["code"], error["data"]) == (-32010, {"code": "PROJECT_NOT_FOUND"})


async def test_methods_and_their_errors_are_documented(registry: Registry) -> None:
    """docs/protocol.md has a row for every memory:* method and every error code they declare."""
    assert_documented(registry, ("memory:",))
