"""Chunking: offsets, exact token counts, paragraph/sentence boundaries, overlap, stability under edits."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from services.retrieval.chunking import chunk_text, content_hash
from services.tokenizer import resolve_tokenizer
from tests.support.scenarios import zh_chapter

COUNT = resolve_tokenizer().count


def test_every_chunk_is_its_slice_with_an_exact_count_and_hash() -> None:
    """text == document[start:end], tokens == the tokenizer's count, hash of the text, ordinals in order."""
    doc = zh_chapter("第一章", 80)
    chunks = chunk_text(doc, COUNT)
    assert len(chunks) > 3
    for n, chunk in enumerate(chunks):
        assert chunk.ordinal == n
        assert doc[chunk.start:chunk.end] == chunk.text
        assert chunk.tokens == COUNT(chunk.text)
        assert chunk.hash == content_hash(chunk.text)
        assert chunk.tokens <= 200


def test_chunks_end_on_sentence_boundaries_in_chinese_and_english() -> None:
    """Chunks close after 。！？ or . ! ? (with closing quotes), never mid-sentence when sentences fit."""
    zh = "".join(f"林远第{n}次走上灯塔的台阶，海风很大。“你听见了吗？”她问。" for n in range(60))
    en = " ".join(f"Mara climbed the lighthouse stairs for the {n}th time. \"Did you hear it?\" she asked."
                  for n in range(60))
    for doc in (zh, en):
        chunks = chunk_text(doc, COUNT, target=60, overlap=10)
        assert len(chunks) > 3
        assert all(c.text.rstrip()[-1] in "。？！.?!\"”" for c in chunks)


def test_consecutive_chunks_overlap_inside_a_paragraph() -> None:
    """Within one long paragraph each chunk starts before the previous one ends (the overlap)."""
    doc = "".join(f"第{n}句话讲述灯塔里发生的事情。" for n in range(200))
    chunks = chunk_text(doc, COUNT, target=80, overlap=20)
    assert all(b.start < a.end for a, b in itertools.pairwise(chunks))


def test_a_sentence_longer_than_the_target_is_split() -> None:
    """Text without punctuation still becomes chunks of at most about the target."""
    doc = "没有标点的长句子" * 400
    chunks = chunk_text(doc, COUNT, target=100)
    assert len(chunks) > 5
    assert max(c.tokens for c in chunks) <= 110
    assert "".join(doc[c.start:c.end] for c in chunks) == doc


def test_editing_one_paragraph_keeps_the_other_chunks() -> None:
    """After changing one paragraph in the middle, at most a few chunk hashes are new."""
    paragraphs = [zh_chapter(f"第{n}节", 6, start=n * 6) for n in range(40)]
    before = chunk_text("\n\n".join(paragraphs), COUNT)
    paragraphs[20] = paragraphs[20].replace("。", "，然后停了一下。", 1)
    after = chunk_text("\n\n".join(paragraphs), COUNT)
    new = {c.hash for c in after} - {c.hash for c in before}
    assert 1 <= len(new) <= 3, len(new)


_TEXT = st.lists(st.one_of(
    st.text(alphabet="林远灯塔钥匙海风台阶我们他的了。！？，", min_size=1, max_size=40),
    st.text(alphabet="abc defg.!?,\"", min_size=1, max_size=40),
    st.just("\n"), st.just("\n\n")), max_size=60).map("".join)


@settings(max_examples=60, deadline=None)
@given(_TEXT, st.integers(min_value=8, max_value=120))
def test_chunks_cover_every_visible_character(doc: str, target: int) -> None:
    """Every non-space character of the document is inside some chunk, and every chunk is its slice."""
    chunks = chunk_text(doc, COUNT, target=target, overlap=target // 5)
    covered: set[int] = set()
    for chunk in chunks:
        assert doc[chunk.start:chunk.end] == chunk.text
        assert chunk.tokens == COUNT(chunk.text)
        covered.update(range(chunk.start, chunk.end))
    assert all(i in covered for i, ch in enumerate(doc) if not ch.isspace())


def test_growing_a_short_paragraph_does_not_move_later_boundaries() -> None:
    """With short and long paragraphs alternating (short ones join the next when it fits whole),
    lengthening any one paragraph changes at most two chunks."""
    paragraphs = [zh_chapter("x", 7 if n % 2 else 3, start=n * 7).split("\n", 1)[1].strip()
                  for n in range(40)]
    before = chunk_text("\n\n".join(paragraphs), COUNT)
    for n in range(0, 40, 3):
        paragraphs[n] = paragraphs[n].replace("。", "，他停下来想了想。", 1)
        after = chunk_text("\n\n".join(paragraphs), COUNT)
        assert len({c.hash for c in after} - {c.hash for c in before}) <= 2, n
        before = after
