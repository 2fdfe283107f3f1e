"""Reading order: documents sorted naturally, digit runs as numbers, case-insensitive, total."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from services.reading.layout import reading_order

PROPERTY = settings(max_examples=200, deadline=None)


def test_digit_runs_compare_as_numbers() -> None:
    """ch2 before ch10, 第2章 before 第10章, in folders too."""
    assert reading_order(["ch10.md", "ch2.md", "ch1.md"]) == ["ch1.md", "ch2.md", "ch10.md"]
    assert reading_order(["第10章.md", "第2章.md", "第1章.md"]) == ["第1章.md", "第2章.md", "第10章.md"]
    assert reading_order(["part2/ch1.md", "part10/ch1.md", "part2/ch10.md", "part2/ch9.md"]) == [
        "part2/ch1.md", "part2/ch9.md", "part2/ch10.md", "part10/ch1.md"]


def test_case_and_width_are_ignored_and_ties_are_broken() -> None:
    """Ch3 sorts between ch2 and ch4; full-width ＣＨ１ is ch1; ch02 and ch2 (and Ch2, ch2) are ordered
    by their code points, so the order never depends on the input's order."""
    assert reading_order(["ch4.md", "Ch3.md", "ch2.md", "ＣＨ１.md"]) == [
        "ＣＨ１.md", "ch2.md", "Ch3.md", "ch4.md"]
    assert reading_order(["ch2.md", "ch02.md", "Ch2.md"]) == ["Ch2.md", "ch02.md", "ch2.md"]


def test_a_very_long_digit_run_is_compared_without_int() -> None:
    """Digit runs longer than int() accepts still compare by value."""
    huge = "9" * 5000
    assert reading_order([f"ch{huge}.md", "ch10.md"]) == ["ch10.md", f"ch{huge}.md"]


@PROPERTY
@given(st.lists(st.integers(0, 10_000), unique=True, max_size=20),
       st.sampled_from(["ch{}.md", "第{}章", "Part {}"]))
def test_numbered_ids_sort_by_number(numbers: list[int], pattern: str) -> None:
    """Ids that differ only in their number come out in numeric order."""
    ids = [pattern.format(n) for n in numbers]
    assert reading_order(ids) == [pattern.format(n) for n in sorted(numbers)]


@PROPERTY
@given(st.lists(st.text(max_size=12), max_size=20), st.randoms(use_true_random=False))
def test_order_is_a_permutation_independent_of_input_order(ids: list[str], rng: random.Random) -> None:
    """Any ids come out as a permutation of themselves, the same whatever order they came in."""
    ordered = reading_order(ids)
    assert sorted(ordered) == sorted(ids)
    shuffled = ids[:]
    rng.shuffle(shuffled)
    assert reading_order(shuffled) == ordered
