"""Open Chroma: a local persistent folder by default, or a server by URL."""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog

_log = structlog.get_logger("retrieval.vectors")
_GET_BATCH = 1000  # ids per read of stored vectors
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}[A-Za-z0-9]|[A-Za-z0-9]")


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
    try:
        client = chromadb.PersistentClient(path=str(path), settings=_settings())
    except Exception as exc:  # a damaged folder (e.g. killed mid-flush): vectors are derived data
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        path.rename(aside)
        _log.warning("vectors.damaged", exc_type=type(exc).__name__, moved_to=aside.name)
        path.mkdir()
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient.clear_system_cache()  # the failed open may have cached a half-started system
        client = chromadb.PersistentClient(path=str(path), settings=_settings())
    _log.info("vectors.opened", kind="persistent")
    return client


def close_vector_store(client: Any) -> None:
    close = getattr(client, "close", None)
    if callable(close):
        close()
    _log.info("vectors.closed")


@dataclass(frozen=True, slots=True)
class VectorHit:
    chunk_id: str  # the vector id of the chunk the matching sentence belongs to
    similarity: float
    project_id: str
    document_id: str


def chunk_of_sentence(vector_id: str) -> str:
    """The chunk's vector id of a sentence's (``<chunk>-<n>``, as ``ChunkRecord.passages`` names
    them); any other id is its own."""
    chunk, dash, number = vector_id.rpartition("-")
    return chunk if dash and chunk and number.isdigit() else vector_id


class VectorIndex:
    """One Chroma collection per project, holding a vector per (document, chunk content).

    Blocking calls, made from worker threads. Strata computes the vectors
    itself (in batches, off the event loop) and hands them over with ids.
    """

    def __init__(self, client: Any, embedding: Any) -> None:
        self._client = client
        self.embedding = embedding
        self._open: dict[str, Any] = {}

    @staticmethod
    def collection_name(project_id: str) -> str:
        """``strata-<project id>``; an id Chroma would refuse in a name is hashed instead."""
        if _SAFE_ID.fullmatch(project_id):
            return f"strata-{project_id}"
        return "strata-" + hashlib.sha256(project_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def _collection(self, project_id: str) -> Any:
        collection = self._open.get(project_id)
        if collection is None:
            collection = self._client.get_or_create_collection(
                self.collection_name(project_id), embedding_function=self.embedding,
                metadata={"hnsw:space": "cosine"})
            self._open[project_id] = collection
        return collection

    def ids(self, project_id: str) -> set[str]:
        return set(self._collection(project_id).get(include=[])["ids"])

    def add(self, project_id: str, vectors: Sequence[tuple[str, str, str, Any]]) -> None:
        """Store ``(vector id, document id, chunk id, embedding)``: one vector per chunk sentence."""
        if vectors:
            self._collection(project_id).upsert(
                ids=[v[0] for v in vectors], embeddings=[v[3] for v in vectors],
                metadatas=[{"project_id": project_id, "document_id": v[1], "chunk": v[2]} for v in vectors])

    def vectors(self, project_id: str, ids: Iterable[str]) -> dict[str, Any]:
        """The stored vectors of those ``ids`` the collection holds, by id (others are left out)."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, Any] = {}
        collection = self._collection(project_id)
        for start in range(0, len(wanted), _GET_BATCH):
            got = collection.get(ids=wanted[start:start + _GET_BATCH], include=["embeddings"])
            found.update(zip(got["ids"], got["embeddings"], strict=True))
        return found

    def stored(self, project_id: str, ids: Iterable[str]) -> dict[str, tuple[Any, str]]:
        """``(vector, project label)`` of those ``ids`` the collection holds, by id (for the exact
        search's matrix, :mod:`services.retrieval.dense`)."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, tuple[Any, str]] = {}
        collection = self._collection(project_id)
        for start in range(0, len(wanted), _GET_BATCH):
            got = collection.get(ids=wanted[start:start + _GET_BATCH], include=["embeddings", "metadatas"])
            for vid, vector, meta in zip(got["ids"], got["embeddings"], got["metadatas"], strict=True):
                found[vid] = (vector, str((meta or {}).get("project_id", "")))
        return found

    def delete(self, project_id: str, ids: Iterable[str]) -> None:
        batch = list(ids)
        if batch:
            self._collection(project_id).delete(ids=batch)

    def release(self, project_id: str) -> None:
        """Forget the open handle of the project's collection (its vectors stay stored)."""
        self._open.pop(project_id, None)

    def drop(self, project_id: str) -> None:
        self._open.pop(project_id, None)
        with contextlib.suppress(Exception):  # absent already: nothing to drop
            self._client.delete_collection(self.collection_name(project_id))

    def query(self, project_id: str, embedding: Any, limit: int,
              labelled: int | None = None) -> list[VectorHit]:
        """The ``limit`` nearest sentence vectors, nearest first. The labels stored with the first
        ``labelled`` (all by default) are read and kept in each hit (another project's label fails the
        scope check later); the rest are the queried project's, their chunk read from their id.

        No count() first: Chroma answers with what it holds when that is fewer than ``limit``, and a
        count took longer than the query itself. Labels are read apart, for the head only: reading
        them for 400 hits took three times as long as the search.
        """
        collection = self._collection(project_id)
        found = collection.query(query_embeddings=[embedding], n_results=limit, include=["distances"])
        ids, distances = found["ids"][0], found["distances"][0]
        head = ids[:limit if labelled is None else labelled]
        labels: dict[str, Any] = {}
        if head:
            got = collection.get(ids=head, include=["metadatas"])
            labels = dict(zip(got["ids"], got["metadatas"], strict=True))
        hits = []
        for n, (vid, distance) in enumerate(zip(ids, distances, strict=True)):
            if n < len(head):
                meta = labels.get(vid) or {}
                hits.append(VectorHit(str(meta.get("chunk", vid)), 1.0 - float(distance),
                                      str(meta.get("project_id", "")), str(meta.get("document_id", ""))))
            else:
                hits.append(VectorHit(chunk_of_sentence(vid), 1.0 - float(distance), project_id, ""))
        return hits
