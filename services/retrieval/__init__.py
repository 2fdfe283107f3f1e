"""Retrieval over the writer's project: chunks in SQL, vectors in Chroma, terms in BM25.

Kept light to import (config reads :mod:`embedding_spec`); the builders import
Chroma and the encoder only when called.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.retrieval.embedding_spec import DEFAULT_EMBEDDING

if TYPE_CHECKING:
    from collections.abc import Callable

    from services.caches import QueryTerms, SearchResults
    from services.retrieval.embeddings import Embedder
    from services.retrieval.service import Retrieval, Roots
    from services.store import Database
    from services.tokenizer import Tokenizer


def create_retrieval(database: Database, client: Any, tokenizer: Tokenizer, *,
                     embedding: str = DEFAULT_EMBEDDING, configured: bool = False,
                     roots: Roots,
                     debounce: float = 0.3, watch: bool = True,
                     results: SearchResults | None = None, query_terms: QueryTerms | None = None,
                     embedder: Embedder | None = None,
                     idle_after: float | None = None, max_open: int | None = None,
                     on_freed: Callable[[], None] | None = None,
                     cache_dir: Path | None = None,
                     spare_core: Callable[[], bool] | None = None) -> Retrieval:
    """The retrieval service over an open database and Chroma client (loads the encoder: blocking).

    ``embedding`` is the config string; ``configured`` says it was chosen rather than defaulted
    (``system:info`` tells which). ``results`` keeps search results and ``query_terms`` the terms
    of query runs (the composition root's caches; private ones if None). ``embedder``: the encoder
    already chosen, else chosen here. The default, e5, falls back to the Universal Sentence Encoder
    where it cannot load; the index records the encoder actually used. ``idle_after`` (seconds) and
    ``max_open``: when projects' indexes leave memory (:meth:`Retrieval.release`); by default they
    stay. ``on_freed`` runs when much memory was just freed: indexes released, or an index pass that
    embedded many sentences (the encoder's working arrays). ``cache_dir``: where jieba's dictionary,
    once built, is kept for the next start (none: built at each start). ``spare_core``: whether the
    server's other core is idle now (no assembly for a while); index passes then embed on it too
    (services/retrieval/batches.py).
    """
    from services.context.counting import CountCache
    from services.retrieval.embeddings import choose_embedding
    from services.retrieval.indexer import Indexer
    from services.retrieval.lexical import Terms
    from services.retrieval.service import Retrieval
    from services.retrieval.store import ChunkStore
    from services.retrieval.vectors import VectorIndex

    store = ChunkStore(database)
    if embedder is None:
        embedder = choose_embedding(embedding, configured=configured)
    vectors = VectorIndex(client, embedder.function)
    terms = Terms(cache_dir)
    info = tokenizer.info
    # Sentences and chunks repeat from one pass to the next: an edit counts only what it changed.
    counter = CountCache(tokenizer, max_entries=200_000)
    indexer = Indexer(store, vectors, terms, counter.count, embedding=embedder.name,
                      tokenizer=f"{info.encoding}:{'exact' if info.exact else 'estimate'}",
                      spare_core=spare_core, batch=embedder.batch)
    return Retrieval(store, indexer, vectors, terms, roots=roots, debounce=debounce, watch=watch,
                     embedder=embedder, results=results, query_terms=query_terms, idle_after=idle_after,
                     max_open=max_open,
                     on_freed=on_freed)


class Standalone:
    """Retrieval with its own SQLite file and Chroma folder under one directory, for scripts."""

    def __init__(self, data_dir: Path, *, embedding: str | None = None, watch: bool = False,
                 roots: Roots | None = None, **options: Any) -> None:
        """``embedding`` None: ``STRATA_EMBEDDING`` if set (as the server reads it), else the default.
        ``roots`` finds a project's folder when it was not given (none by default); ``options`` go to
        :func:`create_retrieval` (``idle_after``, ``max_open``, ...)."""
        from services.retrieval.vectors import open_vector_store
        from services.store import open_database
        from services.tokenizer import resolve_tokenizer

        data_dir.mkdir(parents=True, exist_ok=True)
        self.database = open_database(f"sqlite:///{data_dir / 'strata.db'}")
        self.client = open_vector_store(path=data_dir / "chroma")
        self.tokenizer = resolve_tokenizer()
        configured = embedding or os.environ.get("STRATA_EMBEDDING")
        self.retrieval = create_retrieval(self.database, self.client, self.tokenizer,
                                          embedding=configured or DEFAULT_EMBEDDING,
                                          configured=configured is not None,
                                          roots=roots or _no_roots, watch=watch,
                                          cache_dir=data_dir / "cache", **options)

    async def close(self) -> None:
        from services.retrieval.vectors import close_vector_store

        await self.retrieval.close()
        close_vector_store(self.client)
        self.database.close()


async def _no_roots(project_id: str) -> Path:
    raise LookupError("open the project with its folder first")


def build_retrieval(data_dir: Path, **options: Any) -> Standalone:
    """A :class:`Standalone` retrieval under ``data_dir``: ``.retrieval`` to use, ``await .close()``."""
    return Standalone(data_dir, **options)


__all__: list[str] = ["DEFAULT_EMBEDDING", "Standalone", "build_retrieval", "create_retrieval"]
