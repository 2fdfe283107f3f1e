"""Sanity of the retrieval evaluation set: the generated corpus, its fact spans, and the labelled queries."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest

from services.projects.document_ids import document_segments
from services.retrieval.lexical import Terms
from tests.retrieval_eval.corpus import Corpus, build_corpus, chinese_number
from tests.retrieval_eval.projects import PROJECTS
from tests.retrieval_eval.queries import KINDS, PARTS, QUERIES, split

SMALL = 0.03


@pytest.fixture(scope="module")
def small() -> Corpus:
    return build_corpus(scale=SMALL)


def test_same_seed_same_corpus_other_seed_other_text(small: Corpus) -> None:
    """Generation is deterministic for a seed and scale, and the seed really drives the text."""
    again = build_corpus(scale=SMALL)
    assert [(d.project_id, d.id, d.text) for d in again.documents] == \
        [(d.project_id, d.id, d.text) for d in small.documents]
    assert again.facts == small.facts
    other = build_corpus(seed=small.seed + 1, scale=SMALL)
    assert [d.text for d in other.documents] != [d.text for d in small.documents]
    assert {f.id for f in other.facts.values()} == {f.id for f in small.facts.values()}


def test_every_fact_span_is_its_text_and_occurs_once(small: Corpus) -> None:
    """A fact's [start, end) code-point span in its document is its text, planted once in the corpus."""
    assert len(small.facts) == sum(len(spec.facts) for spec in PROJECTS)
    for fact in small.facts.values():
        document = small.document(fact.project_id, fact.document_id)
        assert document.text[fact.start:fact.end] == fact.text
        assert document.chapter == fact.chapter
        assert sum(d.text.count(fact.text) for d in small.documents) == 1, fact.id


def test_spans_survive_the_round_trip_through_files(small: Corpus, tmp_path: Path) -> None:
    """What is written to disk reads back (UTF-8, no newline translation) with the same offsets."""
    folders = small.write(tmp_path)
    for fact in small.facts.values():
        text = (folders[fact.project_id] / fact.document_id).read_text(encoding="utf-8")
        assert text[fact.start:fact.end] == fact.text


def test_projects_are_bilingual_folders_of_chapters(small: Corpus) -> None:
    """At least one Chinese and one English project; every document id is a valid Markdown id in a folder."""
    assert {p.language for p in small.projects} == {"zh", "en"}
    assert small.document("wugang", "卷一/第03章.md").text.startswith("# 第三章 ")
    assert small.document("salt-road", "part-1/chapter-03.md").text.startswith("# Chapter 3: ")
    assert small.document("qingshi", "下部/第16回.md").text.startswith("# 第十六回 ")
    for document in small.documents:
        segments = document_segments(document.id)
        assert len(segments) == 2
        assert segments[-1].endswith(".md")


def test_filler_shares_the_facts_vocabulary_but_never_says_where_things_were_hidden(small: Corpus) -> None:
    """Distractors: the facts' people and objects recur in filler; only facts hide things."""
    text = {p.id: "".join(d.text for d in p.documents) for p in small.projects}
    for fact in small.facts.values():
        text[fact.project_id] = text[fact.project_id].replace(fact.text, "")
    assert text["wugang"].count("铜钥匙") > 5
    assert text["wugang"].count("灯塔") > 20
    assert text["salt-road"].count("brass key") > 2
    assert text["salt-road"].count("Mara") > 20
    assert "藏" not in text["wugang"] + text["qingshi"]
    assert not re.search(r"\bhid(den)?\b", text["salt-road"])


def test_the_full_corpus_is_a_few_thousand_chunks_and_quick_to_make() -> None:
    """Scale 1 is ~1.45M code points (~700k cl100k tokens, a few thousand chunks), made in under 10 s."""
    started = time.perf_counter()
    corpus = build_corpus()
    assert time.perf_counter() - started < 10
    assert len(corpus.documents) == 110
    assert 1_200_000 < corpus.chars < 1_800_000
    zh = sum(p.chars for p in corpus.projects if p.language == "zh")
    assert 250_000 < zh < 450_000  # ~1.3 cl100k tokens per Chinese character; English ~4.4 characters a token


def test_queries_are_labelled_bilingual_and_of_every_kind() -> None:
    """At least 60 queries, unique ids, about half per language, every kind in both, facts that exist;
    a query is in its project's language except the cross-language ones, which are in the other."""
    facts = {f.id: (spec, f) for spec in PROJECTS for f in spec.facts}
    assert len(QUERIES) >= 60
    assert len({q.id for q in QUERIES}) == len(QUERIES)
    languages = Counter(q.language for q in QUERIES)
    assert min(languages["zh"], languages["en"]) >= 0.4 * len(QUERIES)
    everything = {(language, kind) for language in ("zh", "en") for kind in KINDS}
    assert {(q.language, q.kind) for q in QUERIES} == everything
    for query in QUERIES:
        assert query.facts
        assert query.text.strip()
        for fact_id in query.facts:
            spec, fact = facts[fact_id]
            assert spec.id == query.project_id
            if query.kind == "cross_language":
                assert spec.language != query.language, query.id
            else:
                assert spec.language == query.language, query.id
            if query.kind == "cross_chapter":
                assert query.chapter is not None
                assert query.chapter > fact.chapter
        assert (query.chapter is not None) == (query.kind == "cross_chapter")


def test_paraphrase_heavy_and_cross_language_queries_share_almost_no_search_term_with_their_fact(
) -> None:
    """What makes the two new slices hard for BM25, checked with Strata's own terms (jieba words,
    stemmed English words): a paraphrase-heavy query shares at most one term with its fact, a
    cross-language one none; each slice has at least ten queries in each language."""
    terms = Terms()
    facts = {f.id: f for spec in PROJECTS for f in spec.facts}
    counts = Counter((q.kind, q.language) for q in QUERIES)
    for kind in ("paraphrase_heavy", "cross_language"):
        assert min(counts[(kind, "zh")], counts[(kind, "en")]) >= 10
    for query in QUERIES:
        if query.kind not in ("paraphrase_heavy", "cross_language"):
            continue
        shared = set(terms(query.text)) & {t for f in query.facts for t in terms(facts[f].text)}
        assert len(shared) <= (1 if query.kind == "paraphrase_heavy" else 0), (query.id, shared)


def test_split_holds_out_half_of_every_language_and_kind_fixed_by_its_seed() -> None:
    """The tuning / held-out split: every query in one part, at least 40 % held out overall and in each
    language, both parts in every (language, kind), the same for the same seed, another for another."""
    parts = split(QUERIES)
    assert parts.keys() == {q.id for q in QUERIES}
    assert set(parts.values()) == set(PARTS)
    held = [q for q in QUERIES if parts[q.id] == "held-out"]
    assert len(held) >= 0.4 * len(QUERIES)
    for language in ("zh", "en"):
        mine = [q for q in QUERIES if q.language == language]
        assert sum(parts[q.id] == "held-out" for q in mine) >= 0.4 * len(mine)
    for kind in KINDS:
        for language in ("zh", "en"):
            stratum = {parts[q.id] for q in QUERIES if q.kind == kind and q.language == language}
            assert stratum == set(PARTS), (language, kind)
    assert split(QUERIES) == parts
    assert split(list(reversed(QUERIES))) == parts
    assert split(QUERIES, seed=18) != parts
    with pytest.raises(ValueError, match="held_out"):
        split(QUERIES, held_out=1.0)


def test_cross_chapter_queries_recall_early_chapters_from_late_ones() -> None:
    """Cross-chapter queries are written at least ten chapters after the facts they must bring back."""
    facts = {f.id: f for spec in PROJECTS for f in spec.facts}
    for query in QUERIES:
        if query.kind == "cross_chapter":
            assert query.chapter is not None
            assert all(query.chapter - facts[f].chapter >= 10 for f in query.facts), query.id


def test_chinese_numbers() -> None:
    """Chapter headings count in Chinese numerals."""
    numerals = [chinese_number(n) for n in (1, 10, 12, 20, 30, 47)]
    assert numerals == ["一", "十", "十二", "二十", "三十", "四十七"]
    with pytest.raises(ValueError, match="0"):
        chinese_number(0)
