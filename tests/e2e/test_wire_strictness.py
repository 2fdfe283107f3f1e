"""Over a real websocket: the inspector alone switches faults, wire types are strict, text is text.

One ``python -m main serve --debug`` child serves the module. Each test pins one finding of the
attack pass (issue 16): the renderer's token may not call ``debug:faults:set``; params are
checked as the JSON they are (no coercion, camelCase names only, no duplicate keys); request ids
are bounded; a lone surrogate in any text field is ``INVALID_PARAMS`` naming the field, while
NUL, bidi controls and combining marks are carried and retrieval keeps working.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient, connected
from tests.support.process import ServerProcess
from tests.support.scenarios import KEY_FACT, Project, zh_chapter
from tests.support.scenarios import KEY_INSTRUCTION as INSTRUCTION

pytestmark = pytest.mark.server_flags("--debug", "--index-debounce", "0.1")



@pytest.fixture
async def inspector(proc: ServerProcess) -> AsyncIterator[RpcClient]:
    """The debug inspector's connection (the inspector token)."""
    async with connected(proc.url, str(proc.ready["inspectorToken"])) as client:
        yield client


async def reply_to(rpc: RpcClient, frame: str) -> dict[str, Any]:
    """Send a raw frame and return the one reply it gets (matched by no pending id)."""
    await rpc.send_raw(frame)
    reply: dict[str, Any] = await rpc.next_unmatched()
    return reply


async def error_of(rpc: RpcClient, method: str, params: Any) -> dict[str, Any]:
    reply = await rpc.request(method, params)
    assert "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


def locs(error: dict[str, Any]) -> list[list[str]]:
    return [e["loc"] for e in error["data"]["errors"]]


async def settled_project(rpc: RpcClient, folder: Path) -> tuple[Project, str]:
    """A project of three chapters with a planted fact, its index settled; returns the last chapter."""
    project = await Project.open(rpc, folder)
    for n in range(1, 4):
        text = zh_chapter(f"第{n}章", 30, start=n * 30)
        if n == 1:
            text += "\n\n" + KEY_FACT + "\n"
        await project.write(f"第{n:02d}章.md", text)
    deadline = time.monotonic() + 90
    while True:
        status = await rpc.call("index:status", {"projectId": project.project_id})
        if not status["indexing"] and status["documents"] == 3:
            break
        assert time.monotonic() < deadline, "the index did not settle"
        await asyncio.sleep(0.1)
    return project, "第03章.md"


# --------------------------------------------------------------------------- debug faults


async def test_renderer_token_cannot_switch_faults_in_debug_mode(rpc: RpcClient, inspector: RpcClient,
                                                                  tmp_path: Path) -> None:
    """Pins: in debug mode, debug:faults:set with the renderer's token is refused exactly as
    context:inspect is (-32024 CONTEXT_INSPECT_FORBIDDEN) and switches nothing on; the inspector
    token still may."""
    project = await Project.open(rpc, tmp_path / "faults")
    chapter = await project.write("第一章.md", zh_chapter("第一章", 10))
    await project.entity("林远", "灯塔看守人。")
    params = project.params("第一章.md", len(chapter))
    inspect_refusal = await error_of(rpc, "context:inspect", params)
    refusal = await error_of(rpc, "debug:faults:set", {"faults": ["kg", "retrieval", "memory"]})
    assert (refusal["code"], refusal["data"]) == (inspect_refusal["code"], inspect_refusal["data"]) \
        == (-32024, {"code": "CONTEXT_INSPECT_FORBIDDEN"})
    result = await project.assemble("第一章.md", len(chapter))
    assert not [w for w in result["warnings"] if "_UNAVAILABLE" in w], result["warnings"]
    try:
        assert (await inspector.call("debug:faults:set", {"faults": ["kg"]}))["faults"] == ["kg"]
        faulty = await project.assemble("第一章.md", len(chapter))
        assert [w for w in faulty["warnings"] if w.startswith("KG_UNAVAILABLE")]
    finally:
        assert (await inspector.call("debug:faults:set", {"faults": []}))["faults"] == []


# --------------------------------------------------------------------------- strict wire types


@pytest.mark.parametrize("cursor", ["3", True, 2.0, "0x3", [3], {"n": 3}])
async def test_cursor_position_is_an_integer_not_a_lookalike(rpc: RpcClient, tmp_path: Path,
                                                             cursor: Any) -> None:
    """Pins: cursorPosition as "3", true, 2.0 (or any non-integer) is INVALID_PARAMS naming
    cursorPosition; the integer 3 is accepted."""
    project = await Project.open(rpc, tmp_path / "cursor")
    await project.write("a.md", "# A\n\nOne two three.\n")
    error = await error_of(rpc, "context:assemble", project.params("a.md", 0) | {"cursorPosition": cursor})
    assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    assert locs(error) == [["cursorPosition"]]
    assert "prompt" in await rpc.call("context:assemble", project.params("a.md", 3))


async def test_snake_case_names_are_refused_naming_the_field(rpc: RpcClient, tmp_path: Path) -> None:
    """Pins: project_id / cursor_position (the Python names) are unknown on the wire: INVALID_PARAMS
    naming each, with the camelCase name missing; strings and booleans are never coerced."""
    project = await Project.open(rpc, tmp_path / "snake")
    await project.write("a.md", "# A\n\nOne two three.\n")
    error = await error_of(rpc, "context:assemble", {"project_id": project.project_id,
                                                     "documentId": "a.md", "cursor_position": 1})
    assert sorted(map(tuple, locs(error))) == [("cursor_position",), ("projectId",), ("project_id",)]
    assert {e["type"] for e in error["data"]["errors"]} == {"extra_forbidden", "missing"}
    error = await error_of(rpc, "document:list", {"project_id": project.project_id})
    assert sorted(map(tuple, locs(error))) == [("projectId",), ("project_id",)]
    error = await error_of(rpc, "memory:semantic:list", {"projectId": project.project_id,
                                                         "confirmedOnly": "true"})
    assert locs(error) == [["confirmedOnly"]]
    error = await error_of(rpc, "memory:episodic:list", {"projectId": project.project_id, "limit": "5"})
    assert locs(error) == [["limit"]]


async def test_duplicate_keys_are_a_parse_error_not_last_wins(rpc: RpcClient, tmp_path: Path) -> None:
    """Pins: a frame whose object repeats a key (at the top or inside params, even spelt with an
    escape) is refused whole with -32700 PARSE_ERROR and id null; nothing runs."""
    project = await Project.open(rpc, tmp_path / "dup")
    frames = [
        '{"jsonrpc":"2.0","method":"system:info","id":1,"id":2}',
        '{"jsonrpc":"2.0","method":"document:write","id":3,"params":{"projectId":"' + project.project_id
        + '","documentId":"a.md","text":"one","text":"two"}}',
        '{"jsonrpc":"2.0","method":"document:write","id":4,"params":{"projectId":"' + project.project_id
        + '","documentId":"a.md","text":"one","\\u0074ext":"two"}}',
        '[{"jsonrpc":"2.0","method":"system:info","id":5},{"jsonrpc":"2.0","jsonrpc":"2.0",'
        '"method":"system:info","id":6}]',
    ]
    for frame in frames:
        reply = await reply_to(rpc, frame)
        assert reply["id"] is None
        assert (reply["error"]["code"], reply["error"]["data"]) == (-32700, {"code": "PARSE_ERROR"})
        assert "duplicate" in reply["error"]["message"]
    listed = await rpc.call("document:list", {"projectId": project.project_id})
    assert listed["documents"] == []


@pytest.mark.parametrize("request_id", ["1" + "0" * 4298, "9" * 17, str(2**53), "-" + str(2**53),
                                        '"' + "x" * 257 + '"', '"a\\ud800"', "1e300"])
async def test_request_ids_are_bounded(rpc: RpcClient, request_id: str) -> None:
    """Pins: an id outside ±(2^53-1), a string over 256 characters or one holding a lone surrogate is
    -32600 INVALID_REQUEST with id null (before: a 4,299-digit id was accepted and echoed)."""
    reply = await reply_to(rpc, '{"jsonrpc":"2.0","method":"system:info","id":' + request_id + "}")
    assert reply["id"] is None
    assert (reply["error"]["code"], reply["error"]["data"]) == (-32600, {"code": "INVALID_REQUEST"})


@pytest.mark.parametrize("request_id", [2**53 - 1, -(2**53 - 1), 0, "x" * 256, "林", 1.5])
async def test_ids_within_the_bounds_are_echoed(rpc: RpcClient, request_id: Any) -> None:
    """Pins: integers up to ±(2^53-1), strings up to 256 characters and plain numbers are ids."""
    reply = await rpc.request("system:info", None, request_id)
    assert reply["id"] == request_id
    assert reply["result"]["name"] == "strata"


# --------------------------------------------------------------------------- text is text


async def test_lone_surrogate_in_additional_input_is_refused_not_retrieval_off(
        rpc: RpcClient, tmp_path: Path) -> None:
    """Pins: a lone surrogate in additionalInput is INVALID_PARAMS naming the field (never echoing
    it); before, it silently switched retrieval off (RETRIEVAL_UNAVAILABLE, 0 chunks). NUL, a bidi
    override and combining marks are carried: retrieval still finds the planted passage."""
    project, last = await settled_project(rpc, tmp_path / "surrogate")
    length = len((await rpc.call("document:read", {"projectId": project.project_id,
                                                   "documentId": last}))["text"])
    plain = await project.assemble(last, length, "continue", INSTRUCTION)
    assert plain["layers"]["retrieved"]["chunks"] > 0
    assert KEY_FACT in plain["prompt"]
    for bad in (INSTRUCTION + "\ud800", "\udfff" + INSTRUCTION, INSTRUCTION + "\udc00x\ud83d"):
        error = await error_of(rpc, "context:assemble", project.params(last, length, "continue", bad))
        assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
        assert locs(error) == [["additionalInput"]]
        assert INSTRUCTION not in json.dumps(error, ensure_ascii=False)
    for odd in (INSTRUCTION + "\x00", "\u202e" + INSTRUCTION + "\u202c", INSTRUCTION + "e\u0301\u0308\u20dd"):
        result = await project.assemble(last, length, "continue", odd)
        assert not [w for w in result["warnings"] if w.startswith("RETRIEVAL_UNAVAILABLE")], odd
        assert result["layers"]["retrieved"]["chunks"] > 0
        assert KEY_FACT in result["prompt"]


async def test_lone_surrogates_are_refused_in_every_text_field_and_key(rpc: RpcClient, inspector: RpcClient,
                                                                      tmp_path: Path) -> None:
    """Pins: one rule for every method: a lone surrogate in a nested string, a variable's value or
    name, a list item or an unknown name is INVALID_PARAMS whose loc names where it is."""
    project = await Project.open(rpc, tmp_path / "everywhere")
    pid = project.project_id
    cases: list[tuple[RpcClient, str, dict[str, Any], list[Any]]] = [
        (rpc, "document:write", {"projectId": pid, "documentId": "a.md", "text": "x\ud800"}, ["text"]),
        (rpc, "context:assemble", {"projectId": pid, "variables": {"who": "\udc00"}}, ["variables", "who"]),
        (rpc, "context:assemble", {"projectId": pid, "variables": {"w\ud800": "x"}}, ["variables", "[key]"]),
        (inspector, "context:inspect", {"projectId": pid, "skillId": "\ud800"}, ["skillId"]),
        (rpc, "kg:entity:upsert", {"projectId": pid, "kind": "character", "name": "林远",
                                   "aliases": ["远", "\udfff"]}, ["aliases", "1"]),
        (rpc, "segments:upsert", {"projectId": pid, "segment": {"scope": "world", "content": "a\ud800"}},
         ["segment", "content"]),
        (rpc, "project:open", {"path": str(tmp_path / "x\ud800")}, ["path"]),
        (rpc, "system:info", {"n\ud800": 1}, ["[key]"]),
    ]
    for client, method, params, loc in cases:
        error = await error_of(client, method, params)
        assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS"), (method, error)
        assert [loc] == locs(error), (method, error)
        assert error["data"]["errors"][0]["type"] == "string_unicode"
    positional = await error_of(rpc, "document:read", [pid, "a\ud800.md"])
    assert locs(positional) == [["documentId"]]
    assert (await rpc.call("document:list", {"projectId": pid}))["documents"] == []
