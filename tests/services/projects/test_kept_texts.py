"""DocumentStore keeps a text it read while its file stays exactly as read."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from services.errors import ProjectScopeViolation
from services.projects import DocumentStore, ProjectRecord
from services.projects import documents as documents_module
from services.store import Database

SETTLED = documents_module.SETTLED_NS


class Reads:
    """Counts the reads that go to the file (the thread path), not those answered from memory."""

    def __init__(self, store: DocumentStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = store._read

        def read(project_id: str, document_id: str) -> str:
            self.count += 1
            return real(project_id, document_id)

        monkeypatch.setattr(store, "_read", read)


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's clock runs ahead, so files written by the test count as settled."""
    monkeypatch.setattr(documents_module, "time",
                        SimpleNamespace(time_ns=lambda: time.time_ns() + 10 * SETTLED))


def _rewrite(path: Path, text: str) -> None:
    """Change the file in place (no new inode) after the file system's clock has moved on."""
    time.sleep(0.05)
    with path.open("r+", encoding="utf-8") as handle:
        handle.write(text)
        handle.truncate()


@pytest.mark.usefixtures("later")
async def test_an_unchanged_document_is_read_once_and_then_given_from_memory(
        folder: Path, project: ProjectRecord, database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a settled, unchanged document again gives the same text without reading the file."""
    (folder / "ch1.md").write_text("林远推开门。", encoding="utf-8")
    store = DocumentStore(database)
    reads = Reads(store, monkeypatch)
    assert await store.read(project.id, "ch1.md") == "林远推开门。"
    assert await store.read(project.id, "ch1.md") == "林远推开门。"
    assert reads.count == 1


@pytest.mark.usefixtures("later")
async def test_an_edit_outside_the_app_is_read_at_once_even_when_the_size_is_the_same(
        folder: Path, project: ProjectRecord, database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed in place by another program, to a text of the very same size, is read again."""
    path = folder / "ch1.md"
    path.write_text("林远推开门。", encoding="utf-8")
    store = DocumentStore(database)
    reads = Reads(store, monkeypatch)
    assert await store.read(project.id, "ch1.md") == "林远推开门。"
    _rewrite(path, "苏晴关上窗。")
    assert await store.read(project.id, "ch1.md") == "苏晴关上窗。"
    assert reads.count == 2


@pytest.mark.usefixtures("later")
async def test_a_write_through_the_store_is_what_the_next_read_gives(
        folder: Path, project: ProjectRecord, database: Database) -> None:
    """document:write drops the kept text: the read after its acknowledgement gives the new text."""
    (folder / "ch1.md").write_text("旧的一章。", encoding="utf-8")
    store = DocumentStore(database)
    assert await store.read(project.id, "ch1.md") == "旧的一章。"
    await store.write(project.id, "ch1.md", "新的一章。")
    assert await store.read(project.id, "ch1.md") == "新的一章。"


async def test_a_file_changed_moments_ago_is_read_every_time(
        folder: Path, project: ProjectRecord, database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose status changed less than SETTLED_NS before the read is not kept: a second write
    in the same tick of a coarse file-system clock could leave its times as they were."""
    path = folder / "ch1.md"
    path.write_text("刚写好的一章。", encoding="utf-8")
    # The store's clock stays just short of SETTLED_NS after the change, however slow the machine.
    changed = path.stat().st_ctime_ns
    monkeypatch.setattr(documents_module, "time", SimpleNamespace(time_ns=lambda: changed + SETTLED // 2))
    store = DocumentStore(database)
    reads = Reads(store, monkeypatch)
    for _ in range(3):
        assert await store.read(project.id, "ch1.md") == "刚写好的一章。"
    assert reads.count == 3


@pytest.mark.usefixtures("later")
async def test_a_link_put_in_place_of_a_kept_document_is_refused_as_before(
        folder: Path, project: ProjectRecord, database: Database, tmp_path: Path) -> None:
    """A kept document replaced by a link to a file outside the project is refused, as a first read
    of the link would be: the kept text is never given for another file."""
    (folder / "ch1.md").write_text("林远推开门。", encoding="utf-8")
    secret = tmp_path / "secret.md"
    secret.write_text("林远推开窗。", encoding="utf-8")
    store = DocumentStore(database)
    assert await store.read(project.id, "ch1.md") == "林远推开门。"
    (folder / "ch1.md").unlink()
    (folder / "ch1.md").symlink_to(secret)
    with pytest.raises(ProjectScopeViolation):
        await store.read(project.id, "ch1.md")


@pytest.mark.usefixtures("later")
async def test_kept_texts_are_per_project_and_bounded(
        folder: Path, project: ProjectRecord, other_project: ProjectRecord, database: Database,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same document id in two projects gives each project its own text; past KEPT_TEXTS
    documents the least recently read one is read from its file again."""
    monkeypatch.setattr(documents_module, "KEPT_TEXTS", 2)
    (folder / "ch1.md").write_text("甲项目的一章。", encoding="utf-8")
    (tmp_path / "other-novel" / "ch1.md").write_text("乙项目的一章。", encoding="utf-8")
    (folder / "ch2.md").write_text("甲项目的第二章。", encoding="utf-8")
    store = DocumentStore(database)
    reads = Reads(store, monkeypatch)
    assert await store.read(project.id, "ch1.md") == "甲项目的一章。"
    assert await store.read(other_project.id, "ch1.md") == "乙项目的一章。"
    assert await store.read(project.id, "ch1.md") == "甲项目的一章。"
    assert reads.count == 2
    assert await store.read(project.id, "ch2.md") == "甲项目的第二章。"  # the other project's goes
    assert await store.read(other_project.id, "ch1.md") == "乙项目的一章。"
    assert reads.count == 4
    assert len(store._texts) == 2


async def test_reads_that_come_while_a_document_is_read_share_that_read(
        folder: Path, project: ProjectRecord, database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst of reads of a document too large to keep reads the file once and holds one text;
    a caller cancelled does not cancel the read the others wait for; a read after a write reads
    the new text, never joining a read that began before the write."""
    big = "林远推开门。" * (documents_module.KEPT_TEXT_CHARS // 4 // 6 + 1)  # over what is kept
    (folder / "big.md").write_text(big, encoding="utf-8")
    store = DocumentStore(database)
    reads = Reads(store, monkeypatch)
    first = asyncio.ensure_future(store.read(project.id, "big.md"))
    others = [asyncio.ensure_future(store.read(project.id, "big.md")) for _ in range(15)]
    await asyncio.sleep(0)
    first.cancel()
    texts = await asyncio.gather(*others)
    assert reads.count == 1
    assert all(text is texts[0] for text in texts)
    assert texts[0] == big
    held = threading.Event()
    real = store._read

    def slow(project_id: str, document_id: str) -> str:
        held.wait(10)  # the read in flight is still reading when the write comes
        return real(project_id, document_id)

    monkeypatch.setattr(store, "_read", slow)
    pending = asyncio.ensure_future(store.read(project.id, "big.md"))
    await asyncio.sleep(0)
    await store.write(project.id, "big.md", "新的一章。")
    monkeypatch.setattr(store, "_read", real)
    assert await asyncio.wait_for(store.read(project.id, "big.md"), 5) == "新的一章。"
    held.set()
    await pending
