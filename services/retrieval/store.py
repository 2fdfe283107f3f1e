"""The chunk table in SQL: what was indexed, where each chunk sits, its tokens and terms.

Blocking calls, made from worker threads. A document's chunks are replaced in
one transaction, so a reader sees the old chunks or the new, never a mix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import delete, insert
from sqlalchemy import select as sa_select
from sqlmodel import col, select

from services.retrieval.chunking import passages
from services.store import Database
from services.store.tables import RetrievalChunkRow, RetrievalDocumentRow, RetrievalStateRow


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    project_id: str
    document_id: str
    ordinal: int
    start: int
    end: int
    content_hash: str
    tokens: int
    text: str
    terms: tuple[str, ...]
    # The chunk's id in the vector store: same document and content, same vector.
    vector_id: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vector_id", vector_id(self.document_id, self.content_hash))

    def passages(self) -> list[tuple[str, str]]:
        """``(vector id, text)`` of each sentence the vector store holds for this chunk."""
        return [(f"{self.vector_id}-{n}", text) for n, text in enumerate(passages(self.text))]


def vector_id(document_id: str, content_hash: str) -> str:
    key = f"{document_id}\0{content_hash}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class IndexState:
    layout: int
    embedding: str
    tokenizer: str


@dataclass(frozen=True, slots=True)
class FileStamp:
    size: int
    mtime_ns: int


class ChunkStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    def state(self, project_id: str) -> IndexState | None:
        with self._db.session() as session:
            row = session.get(RetrievalStateRow, project_id)
            return IndexState(row.layout, row.embedding, row.tokenizer) if row else None

    def reset(self, project_id: str, state: IndexState) -> None:
        """Forget everything indexed for the project and record how the next index is built."""
        with self._db.session() as session:
            for table in (RetrievalChunkRow, RetrievalDocumentRow):
                session.exec(delete(table).where(col(table.project_id) == project_id))
            session.merge(RetrievalStateRow(project_id=project_id, layout=state.layout,
                                            embedding=state.embedding, tokenizer=state.tokenizer))
            session.commit()

    def stamps(self, project_id: str) -> dict[str, FileStamp]:
        with self._db.session() as session:
            rows = session.exec(select(RetrievalDocumentRow)
                                .where(col(RetrievalDocumentRow.project_id) == project_id))
            return {row.document_id: FileStamp(row.size, row.mtime_ns) for row in rows}

    def replace(self, project_id: str, document_id: str, stamp: FileStamp | None,
                chunks: Sequence[ChunkRecord]) -> None:
        """Swap the document's chunks (``stamp`` None: the document is gone) in one transaction."""
        with self._db.session() as session:
            for table in (RetrievalChunkRow, RetrievalDocumentRow):
                session.exec(delete(table).where(col(table.project_id) == project_id,
                                                 col(table.document_id) == document_id))
            if stamp is not None:
                session.add(RetrievalDocumentRow(project_id=project_id, document_id=document_id,
                                                 size=stamp.size, mtime_ns=stamp.mtime_ns,
                                                 chunks=len(chunks)))
            if chunks:
                session.execute(insert(RetrievalChunkRow), list(_rows(chunks)))
            session.commit()

    def load(self, project_id: str, document_id: str | None = None) -> list[ChunkRecord]:
        """The project's chunks (or one document's), in document and ordinal order."""
        table = RetrievalChunkRow
        columns = [col(c) for c in (table.project_id, table.document_id, table.ordinal, table.start,
                                    table.end, table.content_hash, table.tokens, table.text, table.terms)]
        query = sa_select(*columns).where(col(table.project_id) == project_id)
        if document_id is not None:
            query = query.where(col(table.document_id) == document_id)
        with self._db.session() as session:  # plain rows: ORM objects cost more than the query
            rows = session.execute(query.order_by(col(table.document_id), col(table.ordinal))).all()
        return [ChunkRecord(p, d, ordinal, start, end, digest, tokens, text, tuple(terms.split()))
                for p, d, ordinal, start, end, digest, tokens, text, terms in rows]


def _rows(chunks: Iterable[ChunkRecord]) -> Iterable[dict[str, object]]:
    for c in chunks:
        yield {"project_id": c.project_id, "document_id": c.document_id, "ordinal": c.ordinal,
               "start": c.start, "end": c.end, "content_hash": c.content_hash, "tokens": c.tokens,
               "text": c.text, "terms": " ".join(c.terms)}
