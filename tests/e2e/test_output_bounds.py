"""Reply memory of a real server under the pathological reads of the attack pass (issue 16).

A 2 MiB document of control characters (each sent as the six bytes ``\\u0001``) and a 2 MiB
document of plain ASCII, read in batches and by a client that does not read its socket. With
the default limits (4 MiB frames, so documents of at most 2 MiB) every reply over the frame
limit answers ``RPC_RESULT_TOO_LARGE`` and the server's peak resident memory, from just before
the reads to the end, stays under the stated bound: 64 MiB of reply memory (the process-wide
ceiling) plus eight frames of slack (32 MiB) for what is being read from disk and serialized at
that moment. Before the bounds, the batch of 8 built one 100 MB frame (the server went from
473 MB to 930 MB) and the connection was dropped without an answer.

The control-character document is written into the project folder directly, as another editor
would: over the wire ``document:write`` could not carry it, 2 MiB of ``\\x01`` being a 12 MiB
frame. The plain one is written with ``document:write``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient
from tests.support.process import ServerProcess
from tests.support.silent_client import SilentClient

MIB = 2**20
FRAME_LIMIT = 4 * MIB  # the default --max-frame-bytes
DOCUMENT_BYTES = FRAME_LIMIT // 2  # the largest document the default limits allow
REPLY_MEMORY = 64 * MIB  # the default process-wide ceiling
BOUND = REPLY_MEMORY + 8 * FRAME_LIMIT
CONTROL = "\x01" * DOCUMENT_BYTES
PLAIN = ("The quick brown fox jumps over the lazy dog. " * (DOCUMENT_BYTES // 45 + 1))[:DOCUMENT_BYTES]


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak since the last reset) of ``pid``, in bytes."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024
    return found


def reset_peak(pid: int) -> None:
    """Make VmHWM start again from the current VmRSS (Linux: ``5`` into clear_refs)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


async def prepared(rpc: RpcClient, folder: Path) -> str:
    """The project holding ``control.md`` and ``plain.md`` (2 MiB each), indexed; its id."""
    control = folder / "control.md"
    if not await asyncio.to_thread(control.exists):
        await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(control.write_text, CONTROL, encoding="utf-8")
    project_id: str = (await rpc.call("project:open", {"path": str(folder)}))["project"]["projectId"]
    plain = {"projectId": project_id, "documentId": "plain.md"}
    if not await asyncio.to_thread((folder / "plain.md").exists):
        await rpc.call("document:write", {**plain, "text": PLAIN})
    deadline = time.monotonic() + 100
    while (await rpc.call("index:status", {"projectId": project_id}))["indexing"]:
        assert time.monotonic() < deadline, "indexing did not settle"
        await asyncio.sleep(0.2)
    assert (await rpc.call("document:read", plain))["text"] == PLAIN  # warm: the read path is loaded
    return project_id


def read(project_id: str, document_id: str, id_: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "document:read", "id": id_,
            "params": {"projectId": project_id, "documentId": document_id}}


def escaped_size(document_id: str, text: str, id_: int) -> int:
    """The bytes of ``document:read``'s reply for ``text``, as the server would build it."""
    reply = {"jsonrpc": "2.0", "result": {"documentId": document_id, "text": text}, "id": id_}
    return len(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode())


def too_large(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["error"]["code"] == -32003, reply
    data: dict[str, Any] = reply["error"]["data"]
    assert data["code"] == "RPC_RESULT_TOO_LARGE"
    assert data["limit"] == FRAME_LIMIT
    return data


@pytest.fixture
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "output-bounds-novel"


@pytest.fixture
async def rpc(proc: ServerProcess) -> AsyncIterator[RpcClient]:
    """A client that takes frames up to the server's own limit (the library's default is 1 MiB)."""
    client = await RpcClient.open(proc.url, proc.token, max_size=FRAME_LIMIT)
    try:
        yield client
    finally:
        await client.close()


class Peak:
    """The server's peak RSS from entering to leaving, printed on leaving whatever happened."""

    def __init__(self, proc: ServerProcess, what: str) -> None:
        self.pid = proc.process.pid
        self.what = what
        self.before = self.peak = 0

    def __enter__(self) -> Peak:
        self.before = memory(self.pid)["VmRSS"]
        reset_peak(self.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.peak = memory(self.pid)["VmHWM"]
        print(f"\n{self.what}: RSS {self.before / MIB:.0f} MiB before, peak {self.peak / MIB:.0f} MiB "
              f"(+{self.growth / MIB:.0f} MiB)")

    @property
    def growth(self) -> int:
        return self.peak - self.before


async def next_frame(rpc: RpcClient) -> Any:
    """The next reply frame not matched to a call, or a failure if the connection closes first."""
    frame = asyncio.ensure_future(rpc.unmatched.get())
    closed = asyncio.ensure_future(rpc.ws.wait_closed())
    try:
        await asyncio.wait({frame, closed}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if not frame.done():
            pytest.fail(f"no reply; connection closed: {rpc.ws.close_code}")
        return frame.result()
    finally:
        frame.cancel()
        closed.cancel()


async def test_a_batch_of_eight_control_character_reads(proc: ServerProcess, rpc: RpcClient,
                                                        folder: Path) -> None:
    """The batch of 8 reads of the control-character document answers one small frame of 8
    RPC_RESULT_TOO_LARGE errors, each with the 12 MiB its reply would have been, and the server's
    peak memory stays within the bound."""
    project_id = await prepared(rpc, folder)
    with Peak(proc, "batch of 8 control-character reads") as peak:
        await rpc.ws.send(json.dumps([read(project_id, "control.md", i) for i in range(8)]))
        frame = await next_frame(rpc)
    assert sorted(r["id"] for r in frame) == list(range(8))
    for reply in frame:
        assert too_large(reply)["size"] == escaped_size("control.md", CONTROL, reply["id"])
    assert peak.growth <= BOUND


async def test_a_batch_of_sixteen_plain_reads(proc: ServerProcess, rpc: RpcClient, folder: Path) -> None:
    """The batch of 16 reads of the plain 2 MiB document is one frame within the limit: the
    replies that fit are whole, the others RPC_RESULT_TOO_LARGE; memory stays within the bound."""
    project_id = await prepared(rpc, folder)
    with Peak(proc, "batch of 16 plain reads") as peak:
        await rpc.ws.send(json.dumps([read(project_id, "plain.md", i) for i in range(16)]))
        frame = await next_frame(rpc)
    assert sorted(r["id"] for r in frame) == list(range(16))
    assert len(json.dumps(frame, separators=(",", ":")).encode()) <= FRAME_LIMIT
    whole = [r for r in frame if "result" in r]
    assert len(whole) == 1
    assert whole[0]["result"]["text"] == PLAIN
    for reply in frame:
        if "error" in reply:
            data = too_large(reply)
            assert data["size"] == escaped_size("plain.md", PLAIN, reply["id"])
            assert data["available"] < data["size"]
    assert peak.growth <= BOUND


@pytest.mark.parametrize("document_id", ["control.md", "plain.md"])
async def test_sixteen_unread_single_reads(proc: ServerProcess, rpc: RpcClient, folder: Path,
                                           document_id: str) -> None:
    """A client sends 16 single reads and reads nothing for 3 s, then reads slowly: it gets 16
    RPC_RESULT_TOO_LARGE for the control-character document and 16 whole plain documents, and
    the server's memory stays within the bound all along."""
    project_id = await prepared(rpc, folder)
    with Peak(proc, f"16 unread single reads of {document_id}") as peak:
        silent = await SilentClient.open(proc.port, proc.token)
        try:
            for i in range(16):
                silent.send(read(project_id, document_id, i))
            await asyncio.sleep(3)  # the replies pile up in the server, not in the client
            replies = [json.loads(await silent.read(timeout=60, pause=0.001)) for _ in range(16)]
        finally:
            silent.abort()
    assert sorted(r["id"] for r in replies) == list(range(16))
    for reply in replies:
        if document_id == "control.md":
            assert too_large(reply)["size"] == escaped_size(document_id, CONTROL, reply["id"])
        else:
            assert reply["result"]["text"] == PLAIN
    assert peak.growth <= BOUND
    assert (await rpc.call("system:info"))["name"]  # the server carries on
