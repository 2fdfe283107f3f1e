"""FIFOs, sockets and links named like documents: write refuses them as read does, never opening them."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import services.projects.documents as documents
from services.errors import DocumentNotFound, ProjectScopeViolation
from services.projects import DocumentStore, ProjectRecord
from services.projects.atomic import NotARegularFile, atomic_write
from services.store import Database
from tests.support.projects import make_folder, open_project

WAIT = 10.0  # seconds a refusal may take; a write blocked on a FIFO would take forever


@pytest.fixture
def store(database: Database) -> DocumentStore:
    return DocumentStore(database)


def mode_of(path: Path) -> int:
    return stat.S_IFMT(os.lstat(path).st_mode)


def hidden(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".")]


async def test_write_over_a_fifo_is_document_not_found_and_leaves_it(
        folder: Path, project: ProjectRecord, store: DocumentStore) -> None:
    """A FIFO with no reader, named like a document: write is DOCUMENT_NOT_FOUND like read, at once,
    and the FIFO is still there, still a FIFO, with no temp file beside it."""
    os.mkfifo(folder / "pipe.md")
    with pytest.raises(DocumentNotFound):
        await asyncio.wait_for(store.read(project.id, "pipe.md"), WAIT)
    with pytest.raises(DocumentNotFound) as raised:
        await asyncio.wait_for(store.write(project.id, "pipe.md", "text"), WAIT)
    assert "FIFO" in raised.value.text
    assert mode_of(folder / "pipe.md") == stat.S_IFIFO
    assert hidden(folder) == []


async def test_write_through_an_in_folder_link_to_a_fifo_is_refused(
        folder: Path, project: ProjectRecord, store: DocumentStore) -> None:
    """A link inside the folder to a FIFO: both read and write refuse it, and neither is replaced."""
    os.mkfifo(folder / "pipe.md")
    os.symlink("pipe.md", folder / "alias.md")
    for call in (store.read(project.id, "alias.md"), store.write(project.id, "alias.md", "x")):
        with pytest.raises(DocumentNotFound):
            await asyncio.wait_for(call, WAIT)
    assert (mode_of(folder / "pipe.md"), mode_of(folder / "alias.md")) == (stat.S_IFIFO, stat.S_IFLNK)


@pytest.fixture
def short_project_folder(database: Database) -> Iterator[Path]:
    """A folder with a path short enough to bind a unix socket in (about 100 bytes at most)."""
    with tempfile.TemporaryDirectory(prefix="strata-") as name:
        yield make_folder(Path(name) / "book")


async def test_socket_is_document_not_found_to_read_and_to_write(
        short_project_folder: Path, database: Database, store: DocumentStore) -> None:
    """A unix socket named like a document: read (which used to answer INTERNAL: open() fails with
    ENXIO) and write (which used to replace it with a file) are both DOCUMENT_NOT_FOUND."""
    project = await open_project(database, short_project_folder)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(short_project_folder / "sock.md"))
        with pytest.raises(DocumentNotFound):
            await store.read(project.id, "sock.md")
        with pytest.raises(DocumentNotFound):
            await store.write(project.id, "sock.md", "x")
        assert mode_of(short_project_folder / "sock.md") == stat.S_IFSOCK
    finally:
        listener.close()


async def test_link_to_a_device_is_refused_by_read_and_write_alike(
        folder: Path, project: ProjectRecord, store: DocumentStore) -> None:
    """A link to /dev/null leaves the folder: PROJECT_SCOPE_VIOLATION for read and write alike."""
    os.symlink("/dev/null", folder / "null.md")
    for call in (store.read(project.id, "null.md"), store.write(project.id, "null.md", "x")):
        with pytest.raises(ProjectScopeViolation):
            await asyncio.wait_for(call, WAIT)
    assert mode_of(folder / "null.md") == stat.S_IFLNK


async def test_a_fifo_put_there_after_the_check_is_still_refused(
        folder: Path, project: ProjectRecord, store: DocumentStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the store's own check (as if the FIFO appeared just after it), the atomic writer's check
    refuses it too: DOCUMENT_NOT_FOUND, the FIFO kept, no temp file left."""
    os.mkfifo(folder / "late.md")
    monkeypatch.setattr(documents, "is_special", lambda path: False)
    with pytest.raises(DocumentNotFound):
        await asyncio.wait_for(store.write(project.id, "late.md", "x"), WAIT)
    assert mode_of(folder / "late.md") == stat.S_IFIFO
    assert hidden(folder) == []


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_atomic_write_never_replaces_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    """atomic_write refuses a FIFO or a link at its target (NotARegularFile), without opening or
    following it, and leaves neither the target changed nor its temp file behind."""
    target = tmp_path / "doc.md"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        (tmp_path / "real.md").write_text("kept")
        target.symlink_to("real.md")
    with pytest.raises(NotARegularFile):
        atomic_write(target, b"new")
    assert mode_of(target) == (stat.S_IFIFO if kind == "fifo" else stat.S_IFLNK)
    assert hidden(tmp_path) == []
    if kind == "link":
        assert (tmp_path / "real.md").read_text() == "kept"
