"""The dense query: which sentences before the cursor make it, how their vectors and the
instruction's combine, and the bounded cache of sentence vectors."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from services.retrieval import query
from services.retrieval.chunking import MIN_PASSAGE_CHARS, chunk_text, passages
from services.retrieval.query import (
    INSTRUCTION_WEIGHT,
    RECENCY,
    SentenceVectors,
    combine,
    context_sentences,
    last_sentence_end,
    settled,
)
from services.tokenizer import resolve_tokenizer

COUNT = resolve_tokenizer().count


def test_the_nearest_sentence_weighs_most_and_the_instruction_half() -> None:
    """Sentences are weighted RECENCY ** age (the last is nearest the cursor); their unit sum and the
    instruction's unit vector share the query INSTRUCTION_WEIGHT to the instruction; the result is a
    unit vector. With no instruction the sentences alone make it, and the other way round."""
    old, near, ask = np.eye(3, dtype=np.float32)
    context = RECENCY * old + near
    context /= np.linalg.norm(context)
    expected = (1 - INSTRUCTION_WEIGHT) * context + INSTRUCTION_WEIGHT * ask
    assert np.allclose(combine([old, near], ask), expected / np.linalg.norm(expected))
    assert np.allclose(combine([old, near], None), context)
    assert np.allclose(combine([], ask), ask)
    assert np.isclose(np.linalg.norm(combine([old, near, 3 * ask], 2 * ask)), 1.0)


def test_the_sentence_cache_is_bounded_and_keyed_by_project() -> None:
    """The least recently used entry leaves first; the same sentence hash in two projects is two
    entries."""
    cache = SentenceVectors(max_entries=2)
    cache.put("a", "h1", 1)
    cache.put("b", "h1", 2)
    assert (cache.get("a", "h1"), cache.get("b", "h1")) == (1, 2)
    cache.put("a", "h2", 3)
    assert (cache.get("a", "h1"), len(cache)) == (None, 2)


def test_a_short_last_sentence_is_left_out_as_the_index_joins_it_to_the_next() -> None:
    """A last sentence under MIN_PASSAGE_CHARS (a short line of dialogue) is not in the query: the
    index holds it joined to the sentence after it, which is not written yet. The sentences before
    it stay, each as the index holds it."""
    text = "第27级台阶上落着一层灰，天色暗得很快。“别回头。”"
    assert context_sentences(text) == ["第27级台阶上落着一层灰，天色暗得很快。"]
    text += "张青低声说，没有看谢澜。"
    assert context_sentences(text) == ["第27级台阶上落着一层灰，天色暗得很快。",
                                       "“别回头。”张青低声说，没有看谢澜。"]
    assert context_sentences("他点头。") == []


_LONG = st.one_of(  # sentences that stand alone as passages
    st.text(alphabet="林远灯塔钥匙海风台阶我们他的了，", min_size=MIN_PASSAGE_CHARS, max_size=30)
    .map(lambda s: s + "。"),
    st.text(alphabet="abcdefg ,", min_size=MIN_PASSAGE_CHARS, max_size=30)
    .map(lambda s: "A" + s.strip() + ". ").filter(lambda s: len(s.strip()) >= MIN_PASSAGE_CHARS),
)
_SHORT = st.text(alphabet="别回头走吧", min_size=1, max_size=6).map(lambda s: "“" + s + "。”")
# Prose as writers write it: a short line of dialogue is followed by the sentence that says who spoke.
_SENTENCE = st.one_of(_LONG, st.tuples(_SHORT, _LONG).map("".join))
_DOCUMENT = st.lists(st.lists(_SENTENCE, min_size=1, max_size=12).map("".join), min_size=1, max_size=20)


@settings(max_examples=80, deadline=None)
@given(_DOCUMENT, st.integers(min_value=80, max_value=200))
def test_every_query_sentence_of_indexed_text_is_a_passage_the_index_holds(paragraphs: list[str],
                                                                          target: int) -> None:
    """Anywhere in indexed text (sentences long and short, paragraphs shorter and longer than a
    chunk, chunks overlapping inside a paragraph), the sentences of the dense query are passages of
    the document's chunks, none to embed; but for a chunk's last passage when the chunk ends in
    sentences too short to stand alone, which the index joins to it (the query cannot see them).

    Short sentences here are followed by a long one, as dialogue is by who spoke. A paragraph that
    ends in one where a chunk ends is the known exception: the index joins it to the sentence
    before, the query to the one after (it cannot see where chunks end), so that one sentence is
    embedded, once: the query's sentence vectors are kept."""
    document = "\n\n".join(paragraphs) + "\n"
    held: set[str] = set()
    extended: list[str] = []  # each chunk's last passage
    for chunk in chunk_text(document, COUNT, target=target, overlap=target // 5):
        found = passages(chunk.text)
        held.update(found)
        extended.append(found[-1])
    first_end = min(document.find(end) for end in ("。", ". ") if end in document)
    for cursor in range(first_end + 1, len(document) + 1):  # before it, nothing is settled yet
        for sentence in context_sentences(settled(document[:cursor])):
            assert len(sentence) >= MIN_PASSAGE_CHARS
            assert sentence in held or any(p.startswith(sentence) for p in extended), (cursor, sentence)


@settings(max_examples=300, deadline=None)
@given(head=st.text("林远灯塔。\n ab.", max_size=40), other=st.text("林远灯塔。\n ab.", max_size=40),
       tail=st.text("林远灯塔雾里等了很久。！\n ab.", min_size=31, max_size=31), chars=st.integers(1, 30))
def test_the_context_sentences_read_only_the_last_chars_and_one(head: str, other: str, tail: str,
                                                                chars: int) -> None:
    """The query's sentences depend only on the last ``chars`` + 1 characters of the text before
    the cursor and on whether there are more: what lets a provider keep the query for every
    keystroke that shares them."""
    assert context_sentences(head + tail, chars) == context_sentences(other + tail, chars)


_SPAN_TEXT = st.text(alphabet="林远灯塔ab 3.!?。！？；…」』”)\n", max_size=80)


@settings(max_examples=300)
@given(_SPAN_TEXT, st.integers(0, 2600), _SPAN_TEXT, st.data())
def test_a_span_searched_in_place_ends_where_its_copy_ends(head: str, filler: int, tail: str,
                                                          data: st.DataObject) -> None:
    """last_sentence_end over text[start:end] in place gives the position its copy gives, moved by
    start, and both the end of the last sentence-end match of a scan of the whole copy: whatever
    marks stand just before the span or just after it, and however far back the last end lies (the
    filler carries it past each tier of the search, nearest first)."""
    text = head + "林" * filler + tail
    end = data.draw(st.integers(0, len(text)))
    start = data.draw(st.integers(0, end))
    copy = text[start:end]
    whole = [match.end() for match in query._END.finditer(copy)]
    expected = whole[-1] if whole else None
    assert last_sentence_end(copy) == expected
    assert last_sentence_end(text, start, end) == (None if expected is None else expected + start)
