"""project:* and document:* over the real registry, and once over a real server process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ipc.openrpc import openrpc_document
from ipc.registry import Registry
from services.projects import project_id_for
from tests.ipc.channels.conftest import Rpc, assert_documented
from tests.support.client import RpcClient
from tests.support.process import start_server
from tests.support.projects import make_folder

# The module shares one event loop with its services (see conftest.services).
pytestmark = pytest.mark.asyncio(loop_scope="module")

PROJECT_METHODS = {
    "project:settings:get": {}, "project:settings:update": {"version": 1},
    "document:list": {}, "document:read": {"documentId": "a.md"},
    "document:write": {"documentId": "a.md", "text": "x"},
}


async def test_open_returns_the_project_in_camel_case(rpc: Rpc, folder: Path) -> None:
    """project:open answers {project: {id, projectId, name, path, createdAt}}; id from the path."""
    result = await rpc.call("project:open", {"path": str(folder), "name": "长夜"})
    assert set(result["project"]) == {"id", "projectId", "name", "path", "createdAt"}
    assert result["project"]["id"] == result["project"]["projectId"] == project_id_for(str(folder))
    assert result["project"]["name"] == "长夜"
    again = await rpc.call("project:open", [f"{folder}/."])
    assert again["project"] == result["project"]
    listed = await rpc.call("project:list")
    assert result["project"] in listed["projects"]


@pytest.mark.parametrize("path", ["relative/novel", "/definitely/not/here", ""])
async def test_open_refuses_bad_paths_without_echoing_them(rpc: Rpc, path: str) -> None:
    """A path that is not an existing folder is -32013 PROJECT_PATH_INVALID (or -32602 if empty)."""
    error = await rpc.error("project:open", {"path": path})
    expected = (-32602, "INVALID_PARAMS") if path == "" else (-32013, "PROJECT_PATH_INVALID")
    assert (error["code"], error["data"]["code"]) == expected
    assert "definitely" not in str(error)
    assert ("relative" not in str(error) or path == "")


async def test_settings_update_and_conflict(rpc: Rpc, project_id: str) -> None:
    """Updates bump the version; a stale version is -32015 with data.currentVersion."""
    settings = (await rpc.call("project:settings:get", {"projectId": project_id}))["settings"]
    assert settings["version"] == 1
    assert settings["tokenizerEncoding"] == "cl100k_base"
    updated = (await rpc.call("project:settings:update", {
        "projectId": project_id, "version": 1, "language": "en", "narrativePerson": "first",
        "model": "gpt-4o", "skillPrompts": {"continue": "Continue."}}))["settings"]
    assert (updated["version"], updated["language"], updated["narrativePerson"],
            updated["tokenizerEncoding"], updated["skillPrompts"]) == (
        2, "en", "first", "o200k_base", {"continue": "Continue."})
    error = await rpc.error("project:settings:update",
                            {"projectId": project_id, "version": 1, "language": "zh"})
    assert (error["code"], error["data"]) == (
        -32015, {"code": "RECORD_VERSION_CONFLICT", "currentVersion": 2})


async def test_concurrent_settings_updates_one_wins(rpc: Rpc, project_id: str) -> None:
    """Six updates from version 1 at once over the dispatcher: one result, five conflicts."""
    replies = await asyncio.gather(*(rpc.reply("project:settings:update", {
        "projectId": project_id, "version": 1, "styleNotes": f"note {i}"}) for i in range(6)))
    assert sum("result" in r for r in replies) == 1
    assert sorted(r["error"]["data"]["code"] for r in replies if "error" in r) == \
        ["RECORD_VERSION_CONFLICT"] * 5


@pytest.mark.parametrize("params", [
    {"version": 1, "language": "fr"}, {"version": 0}, {"version": 1, "colour": "red"},
    {"version": 1, "skillPrompts": {"bad id": "x"}}, {"language": "en"},
])
async def test_settings_params_are_checked_on_the_wire(rpc: Rpc, project_id: str,
                                                       params: dict[str, Any]) -> None:
    """Bad values, unknown fields and a missing version are -32602."""
    error = await rpc.error("project:settings:update", {"projectId": project_id, **params})
    assert error["data"]["code"] == "INVALID_PARAMS"


async def test_documents_round_trip(rpc: Rpc, project_id: str, folder: Path) -> None:
    """write creates the file (and folders), list shows it, read returns the exact text."""
    written = await rpc.call("document:write", {"projectId": project_id, "documentId": "卷一/1.md",
                                                "text": "第一章\n林远推开门。"})
    assert written["document"]["documentId"] == "卷一/1.md"
    assert set(written["document"]) == {"documentId", "size", "modifiedAt"}
    assert (folder / "卷一" / "1.md").read_text() == "第一章\n林远推开门。"
    listed = await rpc.call("document:list", {"projectId": project_id})
    assert [d["documentId"] for d in listed["documents"]] == ["卷一/1.md"]
    assert listed["truncated"] is False
    read = await rpc.call("document:read", {"projectId": project_id, "documentId": "卷一/1.md"})
    assert read == {"documentId": "卷一/1.md", "text": "第一章\n林远推开门。"}


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("document_id", ["../escape.md", "{tmp}/escape.md", "out/escape.md",
                                         "..\\escape.md"])
async def test_escaping_writes_are_scope_violations(rpc: Rpc, project_id: str, folder: Path,
                                                    tmp_path: Path, document_id: str) -> None:
    """Writes that would leave the folder answer -32012 PROJECT_SCOPE_VIOLATION and write nothing."""
    outside = make_folder(tmp_path / "outside")
    (folder / "out").symlink_to(outside)
    error = await rpc.error("document:write", {"projectId": project_id, "text": "x",
                                               "documentId": document_id.format(tmp=tmp_path)})
    assert (error["code"], error["data"]) == (-32012, {"code": "PROJECT_SCOPE_VIOLATION"})
    assert _names(outside) == []
    assert _names(tmp_path) == ["novel", "outside"]
    assert _names(folder) == ["out"]


async def test_document_errors(rpc: Rpc, project_id: str) -> None:
    """A missing document is -32011; a non-document id is -32602 naming documentId."""
    missing = await rpc.error("document:read", {"projectId": project_id, "documentId": "none.md"})
    assert (missing["code"], missing["data"]["code"]) == (-32011, "DOCUMENT_NOT_FOUND")
    wrong = await rpc.error("document:write", {"projectId": project_id, "documentId": "x.py",
                                               "text": ""})
    assert wrong["data"]["code"] == "INVALID_PARAMS"
    assert wrong["data"]["errors"][0]["loc"] == ["documentId"]


@pytest.mark.parametrize(("method", "params"), PROJECT_METHODS.items())
async def test_unknown_project_is_project_not_found(rpc: Rpc, method: str,
                                                    params: dict[str, Any]) -> None:
    """Every project-scoped method answers -32010 PROJECT_NOT_FOUND for an unknown project."""
    error = await rpc.error(method, {"projectId": "0000000000000000", **params})
    assert (error["code"], error["data"]) == (-32010, {"code": "PROJECT_NOT_FOUND"})


async def test_discover_lists_each_methods_errors(registry: Registry) -> None:
    """rpc.discover declares the error codes each method can answer."""
    methods = {m["name"]: m for m in openrpc_document(registry, title="t", version="v")["methods"]}
    codes = {name: {e["data"]["code"] for e in m.get("errors", [])} for name, m in methods.items()}
    assert codes["project:open"] == {"PROJECT_PATH_INVALID", "PROJECT_PATH_FORBIDDEN"}
    assert {"PROJECT_NOT_FOUND", "RECORD_VERSION_CONFLICT"} <= codes["project:settings:update"]
    assert {"PROJECT_SCOPE_VIOLATION", "DOCUMENT_NOT_FOUND", "PROJECT_PATH_INVALID",
            "PROJECT_PATH_FORBIDDEN"} \
        <= codes["document:read"]
    assert "PROJECT_SCOPE_VIOLATION" in codes["document:write"]
    params = [p["name"] for p in methods["document:write"]["params"]]
    assert params == ["projectId", "documentId", "text"]


async def test_over_a_real_server_process(tmp_path: Path, folder: Path) -> None:
    """The served process opens a project and writes, lists and reads a document over a websocket."""
    running = start_server(tmp_path / "data")
    try:
        rpc = await RpcClient.open(running.url, running.token)
        try:
            project = (await rpc.call("project:open", {"path": str(folder)}))["project"]
            await rpc.call("document:write", [project["id"], "a.md", "你好"])
            listed = await rpc.call("document:list", {"projectId": project["id"]})
            read = await rpc.call("document:read", {"projectId": project["id"], "documentId": "a.md"})
        finally:
            await rpc.close()
    finally:
        assert running.terminate() == 0
    assert [d["documentId"] for d in listed["documents"]] == ["a.md"]
    assert read["text"] == "你好"
    assert str(folder) not in running.stderr_text()
    assert "你好" not in running.stderr_text()


async def test_methods_and_their_errors_are_documented(registry: Registry) -> None:
    """docs/protocol.md lists every project:* and document:* method and each error they declare."""
    assert_documented(registry, ("project:", "document:"))
