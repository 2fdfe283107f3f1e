"""The folder watcher: which changed paths are documents, and where its library loads."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from services.retrieval import watcher


def test_document_ids_keep_documents_outside_hidden_folders(tmp_path: Path) -> None:
    """Changed paths become document ids relative to the root; hidden folders, other files and
    paths outside the root are left out."""
    paths = [tmp_path / "卷一" / "第01章.md", tmp_path / ".git" / "x.md", tmp_path / "notes.bin",
             tmp_path.parent / "elsewhere.md"]
    assert watcher.document_ids(tmp_path, map(str, paths)) == {"卷一/第01章.md"}


async def test_the_watcher_library_is_imported_on_a_worker_thread(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """watchfiles and its anyio backend take tens of milliseconds to import: the first watch loads
    them on a worker thread, never on the event loop that answers every other call."""
    threads: list[int] = []
    real = watcher._import_watcher

    def recorded() -> None:
        threads.append(threading.get_ident())
        real()

    monkeypatch.setattr(watcher, "_import_watcher", recorded)
    stop = threading.Event()
    stop.set()
    await watcher.watch_documents(tmp_path, lambda _: None, debounce=0.05, stop=stop)
    assert threads
    assert threading.get_ident() not in threads
