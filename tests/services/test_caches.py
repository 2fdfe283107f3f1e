"""ProjectCache: bounded per project (entries and size), droppable per project, never shared."""

from __future__ import annotations

import threading

import pytest

from services.caches import ProjectCache, SourceCaches, rendered_size


def _texts(max_entries: int = 3, max_size: int = 100, max_projects: int = 2) -> ProjectCache[str, str]:
    return ProjectCache(max_entries=max_entries, max_size=max_size, max_projects=max_projects, size=len)


def test_a_kept_value_answers_without_making_it_again() -> None:
    """get_or_make runs ``make`` once per (project, key); the next call returns the same object."""
    cache = _texts()
    made: list[str] = []

    def make() -> str:
        made.append("x")
        return "value"

    first = cache.get_or_make("p1", "k", make)
    assert cache.get_or_make("p1", "k", make) is first
    assert made == ["x"]
    assert cache.get("p1", "k") == "value"
    assert cache.get("p2", "k") is None


def test_entries_per_project_are_bounded_least_recently_used_first() -> None:
    """Past ``max_entries`` in one project, its least recently used entry goes (a read counts as a use)."""
    cache = _texts(max_entries=2)
    cache.put("p1", "a", "1")
    cache.put("p1", "b", "2")
    assert cache.get("p1", "a") == "1"  # "a" is now the most recent
    cache.put("p1", "c", "3")  # drops "b"
    assert (cache.get("p1", "a"), cache.get("p1", "b"), cache.get("p1", "c")) == ("1", None, "3")
    assert cache.entries("p1") == 2


def test_total_size_per_project_is_bounded_and_an_oversized_value_is_not_kept() -> None:
    """The sizes of a project's entries never add up past ``max_size``: the oldest go to make room;
    a value larger than the bound on its own is returned but not kept (and evicts nothing)."""
    cache = _texts(max_entries=10, max_size=10)
    cache.put("p1", "a", "aaaa")
    cache.put("p1", "b", "bbbb")
    cache.put("p1", "c", "cccc")  # 12 > 10: "a" goes
    assert cache.get("p1", "a") is None
    assert cache.size("p1") == 8
    assert cache.get_or_make("p1", "huge", lambda: "x" * 11) == "x" * 11
    assert cache.get("p1", "huge") is None
    assert (cache.get("p1", "b"), cache.get("p1", "c")) == ("bbbb", "cccc")
    cache.put("p1", "b", "bb")  # replacing an entry counts its new size only
    assert cache.size("p1") == 6


def test_one_project_filling_its_share_never_evicts_another_projects_entries() -> None:
    """Bounds are per project: many entries of p2 leave p1's entries in place."""
    cache = _texts(max_entries=2, max_size=100)
    cache.put("p1", "a", "1")
    for n in range(50):
        cache.put("p2", f"k{n}", "v")
    assert cache.get("p1", "a") == "1"
    assert cache.entries("p2") == 2


def test_the_number_of_projects_kept_is_bounded_least_recently_used_first() -> None:
    """Past ``max_projects``, the project used least recently is forgotten as a whole."""
    cache = _texts(max_projects=2)
    cache.put("p1", "a", "1")
    cache.put("p2", "a", "2")
    assert cache.get("p1", "a") == "1"  # p1 is now the most recent
    cache.put("p3", "a", "3")  # p2 goes
    assert cache.projects() == ["p1", "p3"]
    assert cache.get("p2", "a") is None


def test_drop_forgets_one_project_only() -> None:
    """drop(project) removes every entry of that project and nothing of the others."""
    cache = _texts()
    cache.put("p1", "a", "1")
    cache.put("p1", "b", "2")
    cache.put("p2", "a", "3")
    cache.drop("p1")
    assert (cache.entries("p1"), cache.size("p1")) == (0, 0)
    assert cache.get("p1", "a") is None
    assert cache.get("p2", "a") == "3"
    cache.drop("unknown")  # dropping a project with nothing kept is fine


def test_instances_share_nothing() -> None:
    """Two caches (and two SourceCaches bundles) keep separate entries: nothing lives at module level."""
    one, other = _texts(), _texts()
    one.put("p1", "a", "1")
    assert other.get("p1", "a") is None
    first, second = SourceCaches(), SourceCaches()
    assert first.entity_sheets is not second.entity_sheets
    assert first.episode_texts is not second.episode_texts
    first.entity_sheets.put("p1", "k", ("text", frozenset({"te"})))
    assert second.entity_sheets.get("p1", "k") is None


def test_source_caches_drop_a_project_from_every_cache() -> None:
    """SourceCaches.drop forgets the project in every cache (entity sheets, episodes, query terms,
    line and window features, retrieval items and dense queries, record providers' items) and no
    other project's entries."""
    caches = SourceCaches()
    caches.entity_sheets.put("p1", "e", ("sheet", frozenset()))
    caches.episode_texts.put("p1", "e", ("episode", frozenset()))
    caches.episode_texts.put("p2", "e", ("episode", frozenset()))
    caches.query_terms.put("p1", "灯塔", ("灯塔",))
    caches.line_features.put("p1", "灯塔", frozenset({"灯塔"}))
    caches.window_features.put("p1", ("灯塔",), (frozenset({"灯塔"}), 4))
    caches.retrieval_items.put("p1", "k", ("first", "last", ()))
    caches.dense_queries.put("p1", "k", ("query", 1))
    caches.gathered.put("p1", "k", ((), (), 1))
    caches.drop("p1")
    assert caches.entity_sheets.get("p1", "e") is None
    assert caches.episode_texts.get("p1", "e") is None
    assert caches.query_terms.get("p1", "灯塔") is None
    assert caches.line_features.get("p1", "灯塔") is None
    assert caches.window_features.get("p1", ("灯塔",)) is None
    assert caches.retrieval_items.get("p1", "k") is None
    assert caches.dense_queries.get("p1", "k") is None
    assert caches.gathered.get("p1", "k") is None
    assert caches.episode_texts.get("p2", "e") is not None


def test_rendered_size_counts_the_text_twice_and_the_features() -> None:
    """A rendered record's size: its text (once in the value, once as the record texts in the key)
    plus the characters of its features."""
    assert rendered_size(("abcd", frozenset({"ab", "cd"}))) == 12


def test_bounds_must_be_positive() -> None:
    """A cache without room for one entry is refused at construction."""
    with pytest.raises(ValueError, match="positive"):
        ProjectCache(max_entries=0, max_size=1, max_projects=1)


def test_concurrent_puts_keep_the_bounds() -> None:
    """Worker threads filling the cache at once never leave a project past its bounds."""
    cache = _texts(max_entries=5, max_size=20, max_projects=3)

    def fill(n: int) -> None:
        for i in range(300):
            cache.put(f"p{i % 4}", f"{n}-{i}", "abc")

    threads = [threading.Thread(target=fill, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache.projects()) <= 3
    for project in cache.projects():
        assert cache.entries(project) <= 5
        assert cache.size(project) <= 20
