"""Open Chroma: a local persistent folder by default, or a server by URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog

_log = structlog.get_logger("retrieval.vectors")


def _settings() -> Any:
    from chromadb.config import Settings

    # Telemetry would try the network; Strata runs offline.
    return Settings(anonymized_telemetry=False, allow_reset=False)


def open_vector_store(path: Path | None = None, url: str | None = None) -> Any:
    """A Chroma client: HttpClient for ``url``, else PersistentClient at ``path``."""
    import chromadb  # imported here: it is heavy and only the composition root needs it

    if url:
        parts = urlsplit(url)
        client = chromadb.HttpClient(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or (443 if parts.scheme == "https" else 8000),
            ssl=parts.scheme == "https",
            settings=_settings(),
        )
        _log.info("vectors.opened", kind="http")
        return client
    if path is None:
        raise ValueError("a path or a url is required")
    path.mkdir(parents=True, exist_ok=True)
    client = chromadb.PersistentClient(path=str(path), settings=_settings())
    _log.info("vectors.opened", kind="persistent")
    return client


def close_vector_store(client: Any) -> None:
    close = getattr(client, "close", None)
    if callable(close):
        close()
    _log.info("vectors.closed")
