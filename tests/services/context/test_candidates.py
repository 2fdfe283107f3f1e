"""Screened and ordered candidates kept for an assembly's neighbours: the same answer as fresh work."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.budget import make_budget
from services.context.candidates import Candidates, candidates
from services.context.memo import BoundedMemo, NoMemo
from services.context.models import Budget, BudgetProfile, Item, Window
from services.context.plan import Plan
from tests.services.context.factory import item, novel_plan, window

TEXT = "灯塔守夜人林远在雾里点灯。潮水退了，旧船的桅杆露出来。她记得那年冬天的信。"


def _budget(plan: Plan, total: int = 8192) -> Budget:
    return make_budget(BudgetProfile(context_window=total, output_reserve=0), plan, 0)


def _shape(found: Candidates) -> tuple[object, ...]:
    """Everything a caller reads, by item identity."""
    return ([id(i) for i in found.screened.items], [(r.id, r.fate, r.reason) for r in found.screened.reports],
            found.screened.warnings, {s: [id(i) for i in kept] for s, kept in found.ordered.items()},
            None if found.tail is None else (found.tail.section, [id(i) for i in found.tail.items]),
            found.named)


def _items(others: int = 0) -> list[Item]:
    """Passages of the window's own document (with spans) and of others, one of them repeated
    elsewhere, and ``others`` more; entities named or not near the cursor; rules."""
    more = [item(f"chunk:c#{n}", "passages", f"第{n}段：码头上的灯一盏接一盏亮起来了。", 0.5 - n / 100)
            for n in range(others)]
    return [
        *more,
        item("chunk:a#0", "passages", TEXT[:13], 0.9, span=(0, 13)),
        item("chunk:a#1", "passages", TEXT[13:27], 0.8, span=(13, 27)),
        item("chunk:b#0", "passages", TEXT[27:], 0.7),  # the same text, in another document
        item("chunk:b#1", "passages", "远方的钟声。", 0.6),
        item("entity:1", "entities", "林远：守夜人", names=("林远",)),
        item("entity:2", "entities", "桅杆：旧船的", names=("桅杆",)),
        item("constraint:1", "constraints", "不写死亡", 3.0),
    ]


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, len(TEXT)), st.sampled_from([8, 60, 120, 8192])), min_size=1,
                      max_size=12), explain=st.booleans())
def test_kept_candidates_are_the_fresh_ones(steps: list[tuple[int, int]], explain: bool) -> None:
    """For any sequence of cursors over one document (so windows that knock out and name other
    items) and budgets, with or without reports, the candidates a memo keeps are exactly those
    computed afresh: the same items, reports, order, set-apart tail and names."""
    plan, items, memo = novel_plan(), _items(others=8), BoundedMemo(max_screenings=4)
    for cursor, total in steps:
        budget = _budget(plan, total)
        win = window(TEXT[max(0, cursor - 12):cursor], TEXT[cursor:cursor + 12], max(0, cursor - 12))
        kept = candidates(plan, items, win, budget, memo, explain)
        fresh = candidates(plan, items, win, budget, NoMemo(), explain)
        assert _shape(kept) == _shape(fresh)


def test_a_neighbouring_window_that_changes_nothing_shares_the_entry() -> None:
    """Two windows that knock out and name the same items share one kept entry; each caller gets
    its own lists, so changing one leaves the next answer whole."""
    plan, items, memo = novel_plan(), _items(), BoundedMemo()
    budget = _budget(plan)
    first = candidates(plan, items, window("远方", start=1000), budget, memo, explain=False)
    first.screened.items.clear()
    first.ordered["retrieved"].clear()
    second = candidates(plan, items, window("远方的", start=1000), budget, memo, explain=False)
    assert memo.screenings()[0] == 1
    assert [i.id for i in second.ordered["retrieved"]] == ["chunk:a#0", "chunk:a#1", "chunk:b#0", "chunk:b#1"]
    assert len(second.screened.items) == len(items)


def test_a_window_that_knocks_out_another_passage_is_its_own_entry() -> None:
    """A window over a passage drops it as a duplicate (by span, and another document's copy by
    text); the next window, past it, keeps it again: no answer is shared between them."""
    plan, items, memo = novel_plan(), _items(), BoundedMemo()
    budget = _budget(plan)
    over = candidates(plan, items, window(TEXT[20:], start=20), budget, memo, explain=True)
    dropped = {r.id for r in over.screened.reports if r.reason == "duplicate"}
    assert dropped == {"chunk:a#1", "chunk:b#0"}
    clear = candidates(plan, items, window("别处", start=1000), budget, memo, explain=True)
    assert {i.id for i in clear.ordered["retrieved"]} == {"chunk:a#0", "chunk:a#1", "chunk:b#0", "chunk:b#1"}
    assert memo.screenings()[0] == 2


def test_named_entities_come_first_per_window() -> None:
    """An entity named in the window is ordered before one that is not, whichever window came
    before it in the memo."""
    plan, items, memo = novel_plan(), _items(), BoundedMemo()
    budget = _budget(plan)
    for name, first in (("桅杆", "entity:2"), ("林远", "entity:1"), ("桅杆", "entity:2")):
        found = candidates(plan, items, window(f"……{name}……", start=1000), budget, memo, explain=False)
        assert found.named == {first}
        assert next(i.id for i in found.ordered["rules"] if i.section == "entities") == first


def test_kept_candidates_are_bounded_in_entries_and_characters() -> None:
    """Past ``max_screenings`` entries, or the characters their items hold, the least recently used
    go; an entry of over a quarter of the characters bound is given but not kept."""
    plan, memo = novel_plan(), BoundedMemo(max_screenings=2, max_screening_chars=400)
    budget = _budget(plan)
    for n in range(5):
        candidates(plan, [item(f"chunk:x#{n}", "passages", "雾" * 20)], None, budget, memo, explain=False)
    assert memo.screenings() == (2, 40)
    candidates(plan, [item("chunk:big#0", "passages", "雾" * 101)], None, budget, memo, explain=False)
    assert memo.screenings() == (2, 40)
    for n in range(5):
        candidates(plan, [item(f"chunk:y#{n}", "passages", "雾" * 90)], None, budget, memo, explain=False)
    assert memo.screenings() == (2, 180)


def test_without_a_window_nothing_is_knocked_out_or_named() -> None:
    """No window: no item is dropped against it and none is named."""
    plan = novel_plan()
    found = candidates(plan, _items(), None, _budget(plan), NoMemo(), explain=True)
    assert found.named == frozenset()
    assert [r for r in found.screened.reports if r.reason == "duplicate"] == []


def test_a_window_of_its_own_document_names_its_span() -> None:
    """The window's start and cursor place it in the document: a passage whose span it overlaps is
    knocked out, one just before it is not."""
    plan = novel_plan()
    win = Window(before=TEXT[13:20], after="", start=13, cursor=20, tokens_before=0, tokens_after=0)
    found = candidates(plan, _items(), win, _budget(plan), NoMemo(), explain=True)
    assert {r.id for r in found.screened.reports if r.reason == "duplicate"} == {"chunk:a#1"}
