"""Memos of per-text work: same answers as computing, bounded in entries and characters, one per
project for the most recently used projects."""

from __future__ import annotations

import threading
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.engine import assemble
from services.context.memo import BoundedMemo, NoMemo, ProjectMemos, natural_id
from services.context.occurs import norm
from tests.services.context.factory import counter, item, novel_request, window


def test_norm_removes_every_kind_of_whitespace() -> None:
    """Spaces, tabs, newlines and the ideographic space all go; other characters stay in order."""
    assert norm(" 动作场景\t偏好\n短句\u3000。 ") == "动作场景偏好短句。"
    assert norm("") == ""


def test_natural_id_orders_ids_in_creation_order() -> None:
    """Numeric suffixes compare as numbers (9 before 10); ids without one sort before numbered ones
    of the same prefix, by their suffix."""
    ids = ["constraint:10", "constraint:9", "constraint:x", "chunk:a.md#2", "constraint:1", "plain"]
    assert sorted(ids, key=natural_id) == [
        "plain", "chunk:a.md#2", "constraint:x", "constraint:1", "constraint:9", "constraint:10"]
    assert natural_id("episode:42") == ("episode", 42, "")


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.sampled_from(list("ab 林\n\t")), max_size=20), max_size=60))
def test_a_bounded_memo_answers_like_computing(texts: list[str]) -> None:
    """For any texts and ids, in any order and repetition, a small BoundedMemo and NoMemo answer
    exactly what the plain functions do."""
    memo, plain = BoundedMemo(max_entries=5, max_chars=200), NoMemo()
    for text in texts + texts[::-1]:
        assert memo.norm(text) == plain.norm(text) == norm(text)
        key = f"{text}:{len(text)}"
        assert memo.natural_id(key) == plain.natural_id(key) == natural_id(key)


def test_norms_are_bounded_in_entries_oldest_first() -> None:
    """Past ``max_entries`` texts the oldest answer is forgotten (a hit takes no lock and moves
    nothing: the same records come back at every assembly, so hits must stay cheap)."""
    memo = BoundedMemo(max_entries=3)
    for text in ("a a", "b b", "c c"):
        memo.norm(text)
    assert memo.norm("a a") == "aa"  # a hit
    memo.norm("d d")
    assert list(memo._norms) == ["b b", "c c", "d d"]


def test_norms_are_bounded_in_characters() -> None:
    """The texts and normalized texts kept never pass ``max_chars`` characters in all."""
    memo = BoundedMemo(max_entries=1000, max_chars=400)
    for n in range(50):
        memo.norm(f"text {n} " * 3)
        assert memo._chars == sum(len(k) + len(v) for k, v in memo._norms.items()) <= 400
    assert 0 < len(memo._norms) < 50


def test_one_huge_text_is_answered_but_not_kept() -> None:
    """A text above a quarter of ``max_chars`` is normalized but not memoized, so it evicts nothing."""
    memo = BoundedMemo(max_chars=1000)
    memo.norm("small text")
    assert memo.norm("x " * 300) == "x" * 300
    assert list(memo._norms) == ["small text"]


def test_ids_are_bounded_in_entries() -> None:
    """The id memo never holds more than ``max_entries`` ids."""
    memo = BoundedMemo(max_entries=4)
    for n in range(20):
        assert memo.natural_id(f"item:{n}") == ("item", n, "")
        assert len(memo._ids) <= 4


def test_a_memo_is_safe_across_threads() -> None:
    """Assemblies run in worker threads: concurrent use keeps answers right and the bounds held."""
    memo = BoundedMemo(max_entries=16, max_chars=2000)
    failures: list[str] = []

    def work(offset: int) -> None:
        for n in range(400):
            text = f"t {(n + offset) % 40} x"
            if memo.norm(text) != norm(text) or memo.natural_id(f"i:{n}") != ("i", n, ""):
                failures.append(text)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(memo._norms) <= 16
    assert memo._chars <= 2000
    assert len(memo._ids) <= 16


def test_one_memo_per_project_the_same_each_time() -> None:
    """A project gets its own memo, and the same one on every assembly."""
    memos = ProjectMemos()
    first = memos.for_project("p1")
    assert memos.for_project("p1") is first
    assert memos.for_project("p2") is not first


def test_project_memos_keep_the_most_recently_used_projects() -> None:
    """Past ``max_projects`` the least recently used project's memo is dropped (a new one is made if it
    comes back); a project used again stays."""
    memos = ProjectMemos(max_projects=2)
    a = memos.for_project("a")
    b = memos.for_project("b")
    assert memos.for_project("a") is a
    memos.for_project("c")  # evicts b, the least recently used
    assert memos.for_project("a") is a
    assert memos.for_project("b") is not b


def test_dropping_a_project_forgets_its_memo() -> None:
    """``drop`` forgets a project's memo (closing a project); dropping an unknown one is harmless."""
    memos = ProjectMemos()
    first = memos.for_project("p1")
    first.norm("kept text")
    memos.drop("p1")
    memos.drop("never-seen")
    again = memos.for_project("p1")
    assert again is not first
    assert list(again._norms) == []


def test_assembly_with_a_memo_is_the_assembly_without_one() -> None:
    """A memo changes the cost of an assembly, never its bytes or its reports."""
    items = [item(f"constraint:{n}", "constraints", f"约束{n}", key=1) for n in (10, 2, 9)]
    items += [item("s1", "preferences", "动作 场景 偏好短句"), item("s2", "preferences", "动作场景偏好短句"),
              item("r1", "passages", "台阶一级一级向上。")]
    request = novel_request(items, window_=window("我推开灯塔的门。台阶一级一级向上。"))
    plain = assemble(request, counter())
    memo = BoundedMemo(max_entries=2, max_chars=60)
    for _ in range(2):
        memoized = assemble(request, counter(), memo)
        assert (memoized.prompt, memoized.reports, memoized.warnings) == (plain.prompt, plain.reports,
                                                                         plain.warnings)


def test_section_counts_are_bounded_and_hold_what_they_name() -> None:
    """A kept count is given again for its key without counting; past the bound the least recently
    used goes; each entry holds the objects its key names by identity."""
    memo = BoundedMemo(max_counts=2)
    held = [object()]
    calls: list[str] = []

    def count(name: str) -> Callable[[], int]:
        def counting() -> int:
            calls.append(name)
            return len(name)
        return counting

    assert memo.count_of(("a", id(held)), held, count("aa"), lambda: 1) == 2
    assert memo.count_of(("a", id(held)), held, count("other"), lambda: 1) == 2
    assert calls == ["aa"]
    memo.count_of("b", None, count("bbb"), lambda: 1)
    memo.count_of("c", None, count("cccc"), lambda: 1)
    assert memo.counts() == 2
    assert memo.count_of(("a", id(held)), held, count("aa"), lambda: 1) == 2
    assert calls == ["aa", "bbb", "cccc", "aa"]


def test_section_counts_are_bounded_in_the_characters_they_hold() -> None:
    """Section counts go, least recently used first, once the texts they hold pass their
    characters bound, however few they are; one holding over a quarter of it is given but not kept."""
    memo = BoundedMemo(max_count_chars=100)

    def value(n: int) -> Callable[[], int]:
        return lambda: n

    for n in range(5):
        assert memo.count_of(("count", n), None, value(n), value(25)) == n
    assert memo.counts() == 4
    assert memo.held_chars() == 100
    assert memo.count_of("huge", None, value(7), value(26)) == 7
    assert memo.counts() == 4
    assert memo.count_of(("count", 4), None, value(-1), value(25)) == 4  # still kept, the newest
    assert memo.count_of(("count", 0), None, value(-1), value(25)) == -1  # gone first
