"""Bring a project's index up to date with its files (blocking; runs in a worker thread).

The files are the truth. A document is re-chunked when its size or mtime
changed; only chunks whose content is new get embedded. New vectors are added
before the chunk rows are swapped, and vectors no longer used are returned to
the caller to delete after it has published the new snapshot, so a search
always finds the vectors of the chunks it sees.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from services.errors import StrataError
from services.projects.document_ids import is_document_name
from services.projects.documents import (
    MAX_DOCUMENT_BYTES,
    document_ref,
    read_at_most,
    resolve_document,
    walk_document_ids,
)
from services.retrieval.batches import Stopped, embed_batches
from services.retrieval.chunking import OVERLAP_TOKENS, TARGET_TOKENS, chunk_text, content_hash
from services.retrieval.embeddings import BATCH
from services.retrieval.lexical import Terms
from services.retrieval.query import SentenceVectors
from services.retrieval.store import ChunkRecord, ChunkStore, FileStamp, IndexState
from services.retrieval.vectors import VectorIndex

_log = structlog.get_logger("retrieval.indexer")

LAYOUT = 3  # bump when chunking or the meaning of stored chunks changes: every index rebuilds
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

Progress = Callable[[int, int], None]


class IndexStopped(Exception):
    """The pass was asked to stop (the server is closing); what was committed stays consistent."""


@dataclass
class SyncReport:
    documents: int = 0  # looked at
    changed: int = 0
    removed: int = 0
    chunks: int = 0  # written for changed documents
    embedded: int = 0  # new chunks (content not indexed before for the document)
    sentences: int = 0  # sentences of new chunks the encoder embedded
    helped: int = 0  # batches of them embedded on the spare core (services/retrieval/batches.py)
    reused: int = 0  # sentences of new chunks whose vector was already stored or cached
    rebuilt: bool = False
    repaired: int = 0  # vectors that were missing and were embedded again
    seconds: float = 0.0
    orphans: list[str] = field(default_factory=list)  # vector ids to delete once the new snapshot is out
    updates: dict[str, list[ChunkRecord]] = field(default_factory=dict)  # new chunks per document touched


class Indexer:
    def __init__(self, store: ChunkStore, vectors: VectorIndex, terms: Terms, count: Callable[[str], int], *,
                 embedding: str, tokenizer: str, max_bytes: int = MAX_DOCUMENT_BYTES,
                 stop: threading.Event | None = None, cache: SentenceVectors | None = None,
                 spare_core: Callable[[], bool] | None = None, batch: int = BATCH) -> None:
        self._store = store
        self._vectors = vectors
        self._terms = terms
        self._count = count
        # Sentences an assembly embedded before this pass saw them (the one being typed): reused here.
        self.cache = cache or SentenceVectors()
        self.state = IndexState(LAYOUT, embedding, tokenizer)
        self._max_bytes = max_bytes
        self.stop = stop or threading.Event()
        # Whether the server's other core is idle now (no assembly has held or waited for a turn for a
        # while, main/stores.py): then a helper thread embeds batches too. Asked from the index threads.
        self.spare_core = spare_core
        self.batch = batch  # sentences embedded between checks of ``stop`` and of the spare core

    def sync(self, project_id: str, root: Path, only: Iterable[str] | None = None, *, verify: bool = False,
             progress: Progress | None = None) -> SyncReport:
        """Index what changed: every document (``only`` None), or the ones named, read even when
        their size and mtime look unchanged (a write within the file system's mtime resolution)."""
        started = time.perf_counter()
        report = SyncReport()
        if self._store.state(project_id) != self.state:
            self._store.reset(project_id, self.state)
            self._vectors.drop(project_id)
            report.rebuilt = True
            only = None  # everything goes back in, whatever this pass was asked to look at
        if verify and not report.rebuilt:
            current = self._store.load(project_id)
            try:
                report.repaired = self._repair(project_id, current)
            except Exception as exc:  # the collection cannot be read: start it over from the chunk table
                _log.warning("retrieval.vectors_reset", project_id=project_id, exc_type=type(exc).__name__)
                self._vectors.drop(project_id)
                report.repaired = self._repair(project_id, current)
        stamps = self._store.stamps(project_id)
        names = sorted(set(walk_document_ids(root)) | set(stamps)) if only is None else sorted(set(only))
        for done, document_id in enumerate(names, 1):
            self._sync_document(project_id, root, document_id, stamps.get(document_id), report,
                                force=only is not None)
            if progress:
                progress(done, len(names))
        report.documents = len(names)
        report.seconds = time.perf_counter() - started
        _log.info("retrieval.synced", project_id=project_id, documents=report.documents,
                  changed=report.changed, removed=report.removed, chunks=report.chunks,
                  embedded=report.embedded, sentences=report.sentences, reused=report.reused,
                  helped=report.helped, rebuilt=report.rebuilt, repaired=report.repaired,
                  ms=round(report.seconds * 1e3, 1))
        return report

    def _sync_document(self, project_id: str, root: Path, document_id: str, stamp: FileStamp | None,
                       report: SyncReport, *, force: bool) -> None:
        found = self._read(root, document_id, None if force else stamp)
        if found is not None and found[1] is None:
            return  # unchanged
        old = self._store.load(project_id, document_id) if stamp is not None or force else []
        if found is None:
            if stamp is not None or old:
                self._store.replace(project_id, document_id, None, [])
                report.orphans.extend(_passage_ids({c.vector_id: c for c in old}.values()))
                report.updates[document_id] = []
                report.removed += 1
            return
        now, text = found
        assert text is not None
        chunks = self._chunks(project_id, document_id, text, old)
        have = {c.vector_id for c in old}
        fresh = {c.vector_id: c for c in chunks if c.vector_id not in have}
        self._embed(project_id, fresh.values(), report, reuse=old)
        self._store.replace(project_id, document_id, now, chunks)
        report.updates[document_id] = chunks
        kept = {c.vector_id for c in chunks}
        report.orphans.extend(_passage_ids(c for c in {c.vector_id: c for c in old}.values()
                                           if c.vector_id not in kept))
        report.changed += 1
        report.chunks += len(chunks)
        report.embedded += len(fresh)

    def _chunks(self, project_id: str, document_id: str, text: str,
                old: Sequence[ChunkRecord]) -> list[ChunkRecord]:
        known_terms = {c.content_hash: c.terms for c in old}
        return [ChunkRecord(project_id, document_id, c.ordinal, c.start, c.end, c.hash, c.tokens, c.text,
                            known_terms.get(c.hash) or tuple(self._terms(c.text)))
                for c in chunk_text(text, self._count, target=TARGET_TOKENS, overlap=OVERLAP_TOKENS)]

    def _embed(self, project_id: str, chunks: Iterable[ChunkRecord], report: SyncReport | None = None, *,
               reuse: Sequence[ChunkRecord] = ()) -> None:
        """Store a vector for every sentence of ``chunks`` (see :func:`chunking.passages`).

        A sentence that ``reuse`` (the document's chunks before this edit) already had keeps its
        stored vector, and so does one an assembly embedded meanwhile (the cache): only sentences
        new to the document go through the encoder.
        """
        pending = [(pid, text, c) for c in chunks for pid, text in c.passages()]
        known = self._known_vectors(project_id, [text for _, text, _ in pending], reuse)
        fresh = [p for p in pending if content_hash(p[1]) not in known]
        kept = [(pid, c.document_id, c.vector_id, known[content_hash(text)]) for pid, text, c in pending
                if content_hash(text) in known]
        for start in range(0, len(kept), BATCH):
            self._vectors.add(project_id, kept[start:start + BATCH])
        batches = [fresh[start:start + self.batch] for start in range(0, len(fresh), self.batch)]

        def helped(count: int) -> None:
            if report is not None:
                report.helped += count

        embedded = embed_batches(lambda batch: self._vectors.embedding([text for _, text, _ in batch]),
                                 batches, spare_core=self.spare_core, stop=self.stop, on_helped=helped)
        try:
            with contextlib.closing(embedded):  # the helper is done with this pass when it is left
                for batch, vectors in zip(batches, embedded, strict=True):
                    self._vectors.add(project_id, [(pid, c.document_id, c.vector_id, v)
                                                   for (pid, _, c), v in zip(batch, vectors, strict=True)])
        except Stopped:
            raise IndexStopped from None
        if report is not None:
            report.sentences += len(fresh)
            report.reused += len(kept)

    def _known_vectors(self, project_id: str, texts: Sequence[str],
                       reuse: Sequence[ChunkRecord]) -> dict[str, Any]:
        """Vectors already made for ``texts``, by sentence content hash: from the cache, then the
        vector store (the ``reuse`` chunks' sentences)."""
        wanted = {content_hash(text) for text in texts}
        known = {key: vector for key in wanted
                 if (vector := self.cache.get(project_id, key)) is not None}
        stored = {content_hash(text): pid for c in reuse for pid, text in c.passages()}
        lookup = {stored[key]: key for key in wanted - known.keys() if key in stored}
        if lookup:
            for pid, vector in self._vectors.vectors(project_id, lookup).items():
                known[lookup[pid]] = vector
        return known

    def _repair(self, project_id: str, current: Sequence[ChunkRecord]) -> int:
        """Make the vector store hold exactly the vectors of ``current`` (it may have lost some)."""
        stored = self._vectors.ids(project_id)
        chunks = {c.vector_id: c for c in current}.values()
        missing = [c for c in chunks if any(pid not in stored for pid, _ in c.passages())]
        self._embed(project_id, missing)
        self._vectors.delete(project_id, stored - set(_passage_ids(chunks)))
        return len(missing)

    def _read(self, root: Path, document_id: str,
              known: FileStamp | None) -> tuple[FileStamp, str | None] | None:
        """The file's stamp and text (None: its stamp is ``known``, unchanged), or None when it is
        gone or is not an indexable document."""
        if not is_document_name(document_id.rsplit("/", 1)[-1]):
            return None
        try:
            path = resolve_document(root, document_id)
            fd = os.open(path, _READ_FLAGS)
        except (OSError, ValueError, StrataError):
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > self._max_bytes:
                return None
            now = FileStamp(info.st_size, info.st_mtime_ns)
            if now == known:
                return now, None
            data = read_at_most(fd, self._max_bytes + 1)
        finally:
            os.close(fd)
        if len(data) > self._max_bytes:
            return None  # grew past the limit while being read
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            _log.info("retrieval.skipped", document=document_ref(document_id), reason="not utf-8")
            return None
        return now, text


def _passage_ids(chunks: Iterable[ChunkRecord]) -> list[str]:
    return [pid for c in chunks for pid, _ in c.passages()]
