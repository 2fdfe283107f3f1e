"""The small findings of the attack pass (issue 16), over a real websocket to a real server child.

* ``document:write`` over a FIFO, a socket or any other non-regular file is
  refused with the code ``document:read`` gives it (``DOCUMENT_NOT_FOUND``),
  promptly (a FIFO without a reader must never hang the call), and the file
  is left as it was.
* A project ``tokenizerPath`` that does not load as a tokenizer is reported to
  the client: a ``TOKENIZER_INVALID`` warning in ``context:assemble`` results
  and an entry in ``system:info``'s ``tokenizerProblems``, neither naming the
  path; both go away once the file is a tokenizer again.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import models, pre_tokenizers, trainers

from tests.support.client import RpcCallError, RpcClient
from tests.support.scenarios import Project

WAIT = 10.0  # seconds any one call may take here; a blocked write would take forever


async def refusal(rpc: RpcClient, method: str, params: dict[str, Any]) -> str:
    """The error code ``method`` is refused with, within :data:`WAIT` seconds."""
    with pytest.raises(RpcCallError) as raised:
        await asyncio.wait_for(rpc.call(method, params), WAIT)
    return raised.value.data_code


def kind(path: Path) -> str:
    mode = os.lstat(path).st_mode
    return next(name for name, test in (("fifo", stat.S_ISFIFO), ("socket", stat.S_ISSOCK),
                                        ("link", stat.S_ISLNK), ("file", stat.S_ISREG)) if test(mode))


@pytest.fixture
def short_folder() -> Iterator[Path]:
    """A project folder with a short path: a unix socket's path is limited to about 100 bytes."""
    with tempfile.TemporaryDirectory(prefix="strata-") as name:
        yield Path(name) / "book"


async def test_write_over_a_fifo_is_refused_like_a_read_and_never_blocks(
        rpc: RpcClient, tmp_path: Path) -> None:
    """A FIFO named like a document (no reader on it): document:read and document:write both answer
    DOCUMENT_NOT_FOUND within the bounded wait, the FIFO is still a FIFO, and a link inside the
    project to that FIFO is refused the same way; the server keeps answering."""
    project = await Project.open(rpc, tmp_path / "fifo")
    os.mkfifo(project.folder / "pipe.md")
    os.symlink("pipe.md", project.folder / "via-link.md")
    for document_id in ("pipe.md", "via-link.md"):
        ids = {"projectId": project.project_id, "documentId": document_id}
        assert await refusal(rpc, "document:read", ids) == "DOCUMENT_NOT_FOUND"
        assert await refusal(rpc, "document:write", {**ids, "text": "x"}) == "DOCUMENT_NOT_FOUND"
    assert kind(project.folder / "pipe.md") == "fifo"
    assert kind(project.folder / "via-link.md") == "link"
    listed = await rpc.call("document:list", {"projectId": project.project_id})
    assert listed["documents"] == []
    assert [p.name for p in project.folder.iterdir() if p.name.startswith(".")] == []  # no temp left
    assert (await rpc.call("system:info"))["name"] == "strata"


async def test_write_over_a_socket_is_refused_like_a_read(rpc: RpcClient, short_folder: Path) -> None:
    """A unix socket named like a document is DOCUMENT_NOT_FOUND to read and to write, and stays a
    socket (a write used to replace it with a regular file)."""
    project = await Project.open(rpc, short_folder)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(project.folder / "sock.md"))
        ids = {"projectId": project.project_id, "documentId": "sock.md"}
        assert await refusal(rpc, "document:read", ids) == "DOCUMENT_NOT_FOUND"
        assert await refusal(rpc, "document:write", {**ids, "text": "x"}) == "DOCUMENT_NOT_FOUND"
        assert kind(project.folder / "sock.md") == "socket"
    finally:
        listener.close()


async def test_write_through_a_link_to_a_device_is_refused_like_a_read(
        rpc: RpcClient, tmp_path: Path) -> None:
    """A link inside the project to /dev/null is refused by read and write with the same code (the
    link leaves the folder), and stays a link."""
    project = await Project.open(rpc, tmp_path / "device")
    os.symlink("/dev/null", project.folder / "null.md")
    ids = {"projectId": project.project_id, "documentId": "null.md"}
    read_code = await refusal(rpc, "document:read", ids)
    assert await refusal(rpc, "document:write", {**ids, "text": "x"}) == read_code
    assert read_code == "PROJECT_SCOPE_VIOLATION"
    assert kind(project.folder / "null.md") == "link"


def save_tokenizer(path: Path) -> None:
    """A tiny word-level tokenizer.json."""
    hf = HfTokenizer(models.WordLevel(unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train_from_iterator(["the keeper climbed the stairs"],
                           trainer=trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    hf.save(str(path))


def tokenizer_warnings(result: dict[str, Any]) -> list[str]:
    return [w for w in result["warnings"] if w.startswith("TOKENIZER_INVALID")]


async def problems(rpc: RpcClient, project: Project) -> list[dict[str, Any]]:
    info = await rpc.call("system:info")
    return [p for p in info["tokenizerProblems"] if p["projectId"] == project.project_id]


async def test_a_tokenizer_path_that_is_no_tokenizer_is_reported_to_the_client(
        rpc: RpcClient, tmp_path: Path) -> None:
    """tokenizerPath naming a .json file that is not a tokenizer: context:assemble still answers
    (counted with the default encoding) and its warnings carry TOKENIZER_INVALID, and system:info
    lists the project under tokenizerProblems with the reason; neither names the path. Made a
    real tokenizer, the file is loaded again: no warning, no problem listed. Removed, it is
    reported as missing."""
    project = await Project.open(rpc, tmp_path / "tokenizer-book", language="en")
    await project.write("ch1.md", "The keeper climbed the stairs. " * 20)
    secret = tmp_path / "private-name-9f3a"
    secret.mkdir()
    path = secret / "tokenizer.json"
    path.write_text('{"not": "a tokenizer"}')
    await project.update_settings(tokenizerPath=str(path))

    result = await project.assemble("ch1.md", 40)
    [warning] = tokenizer_warnings(result)
    assert "cl100k_base" in warning
    assert result["tokenCount"] > 0
    [problem] = await problems(rpc, project)
    assert problem == {"projectId": project.project_id, "code": "TOKENIZER_INVALID",
                       "reason": "not_a_tokenizer", "fallbackEncoding": "cl100k_base",
                       "since": problem["since"]}
    assert "private-name-9f3a" not in repr(result["warnings"]) + repr(problem)

    save_tokenizer(path)
    result = await project.assemble("ch1.md", 40)
    assert tokenizer_warnings(result) == []
    assert result["tokenizer"]["encoding"] == "hf:tokenizer.json"
    assert await problems(rpc, project) == []

    path.unlink()
    path.write_text("")  # replaced: a different file, and empty
    assert tokenizer_warnings(await project.assemble("ch1.md", 40)) != []
    path.unlink()
    result = await project.assemble("ch1.md", 40)
    assert [p["reason"] for p in await problems(rpc, project)] == ["missing"]
    assert tokenizer_warnings(result) != []

    await project.update_settings(tokenizerPath=None)
    assert tokenizer_warnings(await project.assemble("ch1.md", 40)) == []
    assert await problems(rpc, project) == []
