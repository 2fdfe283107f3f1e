"""Watch a project folder for edits made outside the app (watchfiles), reporting document ids."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import structlog

from services.projects.document_ids import is_document_name

_log = structlog.get_logger("retrieval.watcher")
logging.getLogger("watchfiles").setLevel(logging.WARNING)  # it logs every batch of changes at info


def document_ids(root: Path, paths: Iterable[str]) -> set[str]:
    """The document ids among changed ``paths`` (hidden folders and non-documents left out)."""
    found: set[str] = set()
    for path in paths:
        try:
            parts = Path(path).relative_to(root).parts
        except ValueError:
            continue
        if parts and is_document_name(parts[-1]) and not any(p.startswith(".") for p in parts[:-1]):
            found.add("/".join(parts))
    return found


def _import_watcher() -> None:
    importlib.import_module("watchfiles")
    importlib.import_module("anyio._backends._asyncio")


def _wanted(_change: object, path: str) -> bool:
    name = os.path.basename(path)
    return is_document_name(name) or "." not in name  # documents, and folders (a moved folder)


async def watch_documents(root: Path, changed: Callable[[Iterable[str] | None], None], *, debounce: float,
                          stop: threading.Event) -> None:
    """Call ``changed`` with the ids of documents that changed under ``root`` until ``stop``;
    a changed folder means "look at everything" (None)."""
    # Imported on a worker thread: watchfiles, and the anyio backend it loads on first use, take tens
    # of ms to import (more while other threads import), which on the loop would hold up every call.
    await asyncio.to_thread(_import_watcher)
    from watchfiles import awatch

    try:
        async for changes in awatch(root, watch_filter=_wanted, debounce=max(50, int(debounce * 1000)),
                                    stop_event=stop, recursive=True):
            paths = [path for _, path in changes]
            ids = document_ids(root, paths)
            folders = len(ids) < len(paths)
            changed(None if folders else ids)
            _log.info("retrieval.watched", documents=len(ids), folders=folders)
    except (OSError, RuntimeError) as exc:  # the folder went away or cannot be watched
        _log.warning("retrieval.watch_stopped", exc_type=type(exc).__name__)
