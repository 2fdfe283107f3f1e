"""Cut a document into overlapping chunks along paragraphs and sentences.

A chunk closes at the end of a paragraph once it holds half its target, so an
edit in one paragraph changes the chunks around it and the rest come out the
same: unchanged chunks keep their content hash and are not embedded again.
Offsets are code-point offsets into the document text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

TARGET_TOKENS = 200
OVERLAP_TOKENS = 30

# A sentence ends at Chinese 。！？；…, or at . ! ? followed by space or the end, with any closing
# quotes or brackets; a line break always ends one (and a paragraph).
_SENTENCE = re.compile(
    r"""[^\n]*?(?:[。！？；]+|…+|[.!?]+(?=[\s"'”’)\]」』）]|$)|(?=\n)|$)["'”’)\]」』）]*[ \t]*""")
_PARAGRAPH = re.compile(r"[^\n]+")


@dataclass(frozen=True, slots=True)
class Chunk:
    ordinal: int
    start: int
    end: int
    text: str
    hash: str
    tokens: int


@dataclass(frozen=True, slots=True)
class _Piece:
    start: int
    end: int
    tokens: int
    paragraph_end: bool
    paragraph_tokens: int = 0  # on a paragraph's first piece: the whole paragraph's tokens


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    position = start
    while position < end:
        match = _SENTENCE.match(text, position, end)
        stop = match.end() if match and match.end() > position else end
        yield position, stop
        position = stop


def _split_long(text: str, start: int, end: int, tokens: int, target: int) -> Iterator[tuple[int, int]]:
    """Pieces of about ``target`` tokens from a sentence longer than that (no punctuation to cut at)."""
    parts = -(-tokens // target)
    step = -(-(end - start) // parts)
    for offset in range(start, end, step):
        yield offset, min(end, offset + step)


def _pieces(text: str, count: Callable[[str], int], target: int) -> list[_Piece]:
    pieces: list[_Piece] = []
    for paragraph in _PARAGRAPH.finditer(text):
        sentences = [s for s in _sentences(text, paragraph.start(), paragraph.end())
                     if text[s[0]:s[1]].strip()]
        first = len(pieces)
        for n, (start, end) in enumerate(sentences):
            tokens = count(text[start:end])
            spans = [(start, end)] if tokens <= target else [*_split_long(text, start, end, tokens, target)]
            for k, (a, b) in enumerate(spans):
                last = n == len(sentences) - 1 and k == len(spans) - 1
                pieces.append(_Piece(a, b, tokens if len(spans) == 1 else count(text[a:b]), last))
        if len(pieces) > first:
            total = sum(piece.tokens for piece in pieces[first:])
            pieces[first] = replace(pieces[first], paragraph_tokens=total)
    return pieces


def _groups(pieces: list[_Piece], target: int, overlap: int) -> Iterator[list[_Piece]]:
    """Runs of pieces of about ``target`` tokens, each starting with the last ``overlap`` tokens of
    the one before when it was cut inside a paragraph.

    A short paragraph joins the next one only if the whole of it fits: otherwise
    an edit that grows one paragraph would move every boundary after it.
    """
    current: list[_Piece] = []
    size = 0
    fresh = 0  # pieces in ``current`` that are not overlap
    for piece in pieces:
        if fresh and piece.paragraph_tokens and size + piece.paragraph_tokens > target:
            yield current
            current, size, fresh = [], 0, 0
        if current and fresh and size + piece.tokens > target:
            yield current
            current, size = _tail(current, overlap)
            fresh = 0
        current.append(piece)
        size += piece.tokens
        fresh += 1
        if piece.paragraph_end and size >= target // 2:
            yield current
            current, size, fresh = [], 0, 0
    if fresh:
        yield current


def _tail(pieces: list[_Piece], overlap: int) -> tuple[list[_Piece], int]:
    kept: list[_Piece] = []
    size = 0
    for piece in reversed(pieces):
        if size + piece.tokens > overlap or piece.paragraph_end:
            break
        kept.insert(0, piece)
        size += piece.tokens
    return kept, size


def chunk_text(text: str, count: Callable[[str], int], *, target: int = TARGET_TOKENS,
               overlap: int = OVERLAP_TOKENS) -> list[Chunk]:
    """The chunks of ``text``, each with its offsets, content hash and exact token count."""
    chunks: list[Chunk] = []
    for group in _groups(_pieces(text, count, target), target, overlap):
        start, end = group[0].start, group[-1].end
        body = text[start:end].rstrip()
        chunks.append(Chunk(len(chunks), start, start + len(body), body, content_hash(body), count(body)))
    return chunks


MIN_PASSAGE_CHARS = 12  # a shorter sentence ("他点头。") joins the next one
MAX_PASSAGES = 24


def passages(text: str, limit: int | None = MAX_PASSAGES) -> list[str]:
    """The sentences of a chunk, each embedded on its own: a query matches the one sentence that
    answers it better than the whole chunk around it. Short sentences join the next; past ``limit``
    (None: no limit), the rest are one passage."""
    found: list[str] = []
    for run in passage_runs(text):
        if len(run.strip()) >= MIN_PASSAGE_CHARS or not found:
            found.append(run.strip())
        else:  # the last sentences, too short together: they join the passage before
            found[-1] += run.rstrip()
    if limit is not None and len(found) > limit:
        found[limit - 1:] = ["".join(found[limit - 1:])]
    return found


def passage_runs(text: str) -> Iterator[str]:
    """The sentences of ``text`` as :func:`passages` groups them, unstripped: each run of consecutive
    sentences (a line break between two is left out) that holds :data:`MIN_PASSAGE_CHARS` once
    stripped; the last run may hold fewer (:func:`passages` joins it to the one before)."""
    pending = ""
    for line in _PARAGRAPH.finditer(text):
        for start, end in _sentences(text, line.start(), line.end()):
            pending += text[start:end]
            if len(pending.strip()) >= MIN_PASSAGE_CHARS:
                yield pending
                pending = ""
    if pending.strip():
        yield pending
