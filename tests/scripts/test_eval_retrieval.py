"""Smoke tests of scripts/eval_retrieval.py: a tiny corpus through the real retrieval code, sane figures."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import eval_retrieval
from services.retrieval.search import Hit
from tests.retrieval_eval.corpus import Fact, build_corpus
from tests.retrieval_eval.queries import QUERIES

TINY = 0.05
CHAPTERS = 6
PROJECTS = ("wugang", "salt-road")
PICKED = ("wg-k2", "wg-p1", "wg-c1", "wg-p2", "sr-k6", "sr-p1", "sr-c1")


def _hit(document_id: str, start: int, end: int) -> Hit:
    return Hit("p", document_id, 0, start, end, "", 0, 1.0, None, None)


def _fact(document_id: str, start: int, end: int) -> Fact:
    return Fact("f", "p", document_id, 1, "en", "x" * (end - start), start, end)


@pytest.fixture(scope="module")
def report() -> eval_retrieval.Report:
    queries = [q for q in QUERIES if q.id in PICKED]
    return asyncio.run(eval_retrieval.run_eval(scale=TINY, projects=PROJECTS, chapters=CHAPTERS,
                                               queries=queries))


def test_relevance_is_overlap_of_half_open_spans_in_the_same_document() -> None:
    """A hit is relevant when [start, end) overlaps the fact's span in its document; touching is not."""
    fact = _fact("a.md", 100, 150)
    assert eval_retrieval.overlaps(_hit("a.md", 90, 101), fact)
    assert eval_retrieval.overlaps(_hit("a.md", 149, 300), fact)
    assert eval_retrieval.overlaps(_hit("a.md", 110, 120), fact)
    assert not eval_retrieval.overlaps(_hit("a.md", 50, 100), fact)
    assert not eval_retrieval.overlaps(_hit("a.md", 150, 200), fact)
    assert not eval_retrieval.overlaps(_hit("b.md", 100, 150), fact)
    hits = [_hit("b.md", 100, 150), _hit("a.md", 0, 10), _hit("a.md", 120, 130)]
    assert eval_retrieval.first_rank(hits, [fact]) == 3
    assert eval_retrieval.first_rank(hits[:2], [fact]) is None


def test_scores_are_recall_at_k_and_mrr_within_depth() -> None:
    """recall@k is the share of a query's facts found in the top k; MRR counts only ranks within the depth."""
    one = eval_retrieval.QueryResult("q1", "p", "zh", "keyword", "t", ["a", "b"],
                                     fact_ranks={"hybrid": [1, 7]}, first={"hybrid": 1})
    two = eval_retrieval.QueryResult("q2", "p", "en", "paraphrase", "t", ["c"],
                                     fact_ranks={"hybrid": [12]}, first={"hybrid": 12})
    score = eval_retrieval.score([one, two], "hybrid", k=5, depth=10)
    assert (score.queries, score.recall, score.mrr) == (2, 0.25, 0.5)
    assert eval_retrieval.score([one, two], "hybrid", k=10, depth=20).mrr == pytest.approx((1 + 1 / 12) / 2)
    assert math.isnan(eval_retrieval.score([], "hybrid").recall)


def test_every_query_scored_in_every_mode_with_metrics_in_range(report: eval_retrieval.Report) -> None:
    """All picked queries run in dense, lexical and hybrid; recall@5 and MRR@10 stay within [0, 1]."""
    assert sorted(r.id for r in report.results) == sorted(PICKED)
    for result in report.results:
        for mode in eval_retrieval.ORDER:
            ranks = result.fact_ranks[mode]
            assert len(ranks) == len(result.facts)
            found = [r for r in ranks if r is not None]
            assert result.first[mode] == (min(found) if found else None)
    for by_mode in report.scores.values():
        for score in by_mode.values():
            assert 0.0 <= score.recall <= score.recall_at_10 <= 1.0
            assert 0.0 <= score.mrr <= 1.0
    assert {"all", "zh", "en", "keyword", "paraphrase", "cross_chapter"} <= report.scores.keys()


def test_corpus_facts_are_indexed_where_the_queries_point(report: eval_retrieval.Report) -> None:
    """Each project was chunked and indexed; every query's facts exist and their spans hold the fact text."""
    corpus = build_corpus(scale=TINY, projects=PROJECTS, chapters=CHAPTERS)
    assert [p.id for p in report.projects] == list(PROJECTS)
    for project in report.projects:
        assert project.chunks > 0
        assert project.tokens > 0
        assert project.index_seconds > 0
        assert project.facts == sum(f.project_id == project.id for f in corpus.facts.values())
    for result in report.results:
        for fact_id in result.facts:
            fact = corpus.facts[fact_id]
            assert fact.project_id == result.project_id
            assert corpus.document(fact.project_id, fact.document_id).text[fact.start:fact.end] == fact.text


def test_unique_keywords_are_found_first_by_lexical_search(report: eval_retrieval.Report) -> None:
    """Real behaviour: a name that occurs only in its fact (七号仓库, Agnes Pell) ranks that chunk first."""
    by_id = {r.id: r for r in report.results}
    assert by_id["wg-k2"].first["lexical"] == 1
    assert by_id["sr-k6"].first["lexical"] == 1
    assert by_id["sr-k6"].first["hybrid"] is not None


def test_render_and_json_report_the_same_run(report: eval_retrieval.Report) -> None:
    """The tables name every mode and slice and the machine; the JSON carries scores, verdict and queries."""
    text = eval_retrieval.render(report)
    for needle in ("recall@5", "MRR@10", "dense", "lexical", "hybrid", "cross_chapter", "machine:"):
        assert needle in text
    data = json.loads(json.dumps(report.to_json()))
    assert data["scores"]["all"]["hybrid"]["queries"] == len(PICKED)
    assert data["corpus"]["chunks"] == sum(p.chunks for p in report.projects)
    assert set(data["verdict"]) == {"hybrid_beats_dense", "hybrid_beats_lexical", "target_recall",
                                    "target_met"}
    assert data["queries"]["by_language"] == {"zh": 4, "en": 3}


def test_main_prints_json_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """`--json` prints one JSON document on stdout (progress goes to stderr) and the exit status is 0."""
    status = eval_retrieval.main(["--json", "--scale", str(TINY), "--chapters", "4", "--project", "salt-road",
                                  "--limit", "20"])
    captured = capsys.readouterr()
    assert status == 0
    data = json.loads(captured.out)
    assert data["search_limit"] == 20
    early = {f.id for f in build_corpus(scale=TINY, projects=["salt-road"], chapters=4).facts.values()}
    assert data["queries"]["total"] == sum(q.project_id == "salt-road" and set(q.facts) <= early
                                           for q in QUERIES) > 0
    assert data["corpus"]["documents"] == 4
    assert "indexing salt-road" in captured.err
