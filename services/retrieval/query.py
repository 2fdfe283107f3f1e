"""The dense query of an assembly, made from vectors the index already holds.

The text before the cursor is the writer's own prose, already cut into
sentences and embedded as passages by the index. An assembly's dense query
reuses those stored vectors (found by the sentence's content hash), embeds
only the sentences the index does not hold yet (the one being typed) and the
instruction, and combines them into one vector (:func:`combine`). So a
slower, stronger encoder costs little per assembly.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.retrieval.chunking import MIN_PASSAGE_CHARS, passage_runs

# Measured on the evaluation corpus (docs/retrieval.md, "The dense query of an assembly"): the
# sentence nearest the cursor carries the topic, older ones mostly dilute it; the instruction and the
# sentences together rank better than either alone.
CONTEXT_CHARS = 600  # the text before the cursor whose sentences make the query
CONTEXT_SENTENCES = 4  # at most this many of them, the nearest the cursor
RECENCY = 0.3  # a sentence's weight is RECENCY ** (sentences between it and the cursor)
INSTRUCTION_WEIGHT = 0.5  # the instruction's share of the query when there are sentences too


@dataclass(frozen=True, slots=True)
class DenseQuery:
    """What the encoder is asked: the writer's sentences before the cursor (oldest first), embedded
    as passages (most are in the index), and an instruction, embedded as a query."""

    sentences: tuple[str, ...] = ()
    instruction: str = ""
    document_id: str | None = None  # the document the sentences are from: its stored vectors are reused

    @classmethod
    def before_cursor(cls, before: str, instruction: str = "", document_id: str | None = None) -> DenseQuery:
        """The last sentences of ``before`` (cut as the index cuts them) and the instruction."""
        return cls(tuple(context_sentences(before)), instruction.strip(), document_id)

    def __bool__(self) -> bool:
        return bool(self.sentences) or bool(self.instruction)


def context_sentences(before: str, chars: int = CONTEXT_CHARS, limit: int = CONTEXT_SENTENCES) -> list[str]:
    """The sentences of the last ``chars`` characters of ``before``, at most ``limit``, oldest first,
    each a passage the index holds when ``before`` is indexed text.

    The text is taken from the start of a line, so that it is cut into sentences as the index
    cut the chunk that holds it (:func:`chunking.passages`), and a sentence cut in half by the
    ``chars`` limit is left out. So is a last sentence too short to stand alone: the index joins it
    to the sentence after it, which the writer has not written yet (as the sentence being typed,
    it is not settled); joined to the one before it, it would be a passage the index lacks, and
    every such query would have to be embedded.
    """
    start = max(0, len(before) - chars)
    first = 0
    if start:
        line = before.find("\n", start - 1)
        start = line + 1 if line != -1 else len(before)
        if start >= len(before):  # one long paragraph: from the first sentence that starts in range
            start, first = len(before) - chars, 1
    runs = [run.strip() for run in passage_runs(before[start:])][first:]
    if runs and len(runs[-1]) < MIN_PASSAGE_CHARS:
        runs.pop()
    return runs[-limit:]


# Where a sentence ends, as chunking cuts them: Chinese 。！？；…, or . ! ? before a space, a closer or
# the end, with any closing quotes or brackets; a line break always ends one.
_END = re.compile(r"""(?:[。！？；]+|…+|[.!?]+(?=[\s"'”’)\]」』）]|$))["'”’)\]」』）]*|\n""")
# How far back the last sentence end is looked for, nearest first, before searching all: a scan
# from inside a sentence end's run of marks finds the same end, so each tier finds the end a scan
# from the start would. Most sentences are short: the first tier usually holds one, and a scan walks
# every end in its tier (a keystroke's read-ahead asks for several: 32 µs with tiers from 256
# characters, 11 µs from 64, on the load benchmark's prose).
_TIERS = (64, 256, 2000)


def settled(before: str) -> str:
    """``before`` without the sentence being typed: up to the end of its last whole sentence, so
    every cursor inside one sentence asks the same query (whose sentences are all in the index).
    All of ``before`` when no sentence ends in it."""
    end = last_sentence_end(before)
    return before if end is None else before[:end]


def last_sentence_end(text: str, start: int = 0, end: int | None = None) -> int | None:
    """Where the last whole sentence of ``text[start:end]`` ends, as a position in ``text`` (None
    when no sentence ends in it). The span is searched in place: a window's text is not copied for
    each position a read-ahead looks at (``_END`` looks neither behind its start nor past its end,
    so the span searched in place finds what its copy would)."""
    stop = len(text) if end is None else end
    for tier in (*_TIERS, stop - start):
        found = _last_end(text, max(start, stop - tier), stop)
        if found is not None:
            return found
        if tier >= stop - start:
            break
    return None


def _last_end(text: str, start: int, stop: int) -> int | None:
    last = None
    for match in _END.finditer(text, start, stop):
        last = match
    return None if last is None else last.end()


def combine(sentences: Sequence[Any], instruction: Any | None) -> Any:
    """One unit query vector: the sentence vectors weighted by nearness to the cursor (the last is
    nearest), and the instruction's vector for :data:`INSTRUCTION_WEIGHT` of it."""
    import numpy as np  # here: the server announces itself before numpy is needed

    parts = []
    if len(sentences):
        matrix = np.asarray(sentences, dtype=np.float32)
        weights = RECENCY ** np.arange(len(matrix) - 1, -1, -1, dtype=np.float32)
        context = (matrix * weights[:, None]).sum(axis=0)
        parts.append((1 - INSTRUCTION_WEIGHT if instruction is not None else 1.0) * unit_vector(context))
    if instruction is not None:
        weight = INSTRUCTION_WEIGHT if parts else 1.0
        parts.append(weight * unit_vector(np.asarray(instruction, np.float32)))
    return unit_vector(np.sum(parts, axis=0))


def unit_vector(vector: Any) -> Any:
    """``vector`` scaled to length 1 (a zero vector as it is)."""
    import numpy as np

    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class SentenceVectors:
    """A bounded cache of sentence passage vectors by (project id, sentence content hash).

    Holds hashes and vectors, never text. Filled by the query side: the stored
    vectors it read and the sentences it embedded, which the indexer then
    reuses instead of embedding them again.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._entries: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries

    def get(self, project_id: str, key: str) -> Any | None:
        with self._lock:
            vector = self._entries.get((project_id, key))
            if vector is not None:
                self._entries.move_to_end((project_id, key))
            return vector

    def put(self, project_id: str, key: str, vector: Any) -> None:
        with self._lock:
            self._entries[(project_id, key)] = vector
            self._entries.move_to_end((project_id, key))
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def drop(self, project_id: str) -> None:
        """Forget the project's vectors (its index left memory)."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == project_id]:
                del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
