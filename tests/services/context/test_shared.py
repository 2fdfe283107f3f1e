"""Screening and ordering kept for the very same items give what running them afresh gives, whatever
the window: which passages it already holds and which entities it names are judged every time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.memo import BoundedMemo, NoMemo
from services.context.models import Item, Window
from services.context.reduce import order_items
from services.context.screening import screen
from services.context.shared import screen_and_order
from tests.services.context.factory import item, novel_plan, window

PASSAGES = ("林远推门。", "海风灌进来。", "灯塔的光扫过海面。", "林远推门。", "苏晴在城里。")
POOL = (
    item("constraint:1", "constraints", "严格第一人称叙述", key=5.0),
    item("constraint:2", "constraints", "严格第一人称叙述", key=3.0),  # same text: a duplicate
    item("entity:1", "entities", "林远（角色）：灯塔看守人。", key=0.2, origin="kg", names=("林远",)),
    item("entity:2", "entities", "苏晴（角色）：医生。", key=0.4, origin="kg", names=("苏晴", "晴")),
    item("entity:3", "entities", "灯塔（地点）：岛上。", key=0.4, origin="kg", names=("灯塔",)),
    item("semantic:1", "preferences", "动作场景用短句", key=0.9),
    *(item(f"chunk:d#{n}", "passages", text, key=1.0 - n / 10, span=(n * 10, n * 10 + 8) if n < 3 else None)
      for n, text in enumerate(PASSAGES)),
    item("episode:1", "history", "指令：写海风\n采纳：海风灌进来。", key=0.5),
)
TEXTS = ("", "林远推门。", "灯塔的光扫过海面。苏晴", "海风灌进来。晴天", "他走了。")


def _window(before: int, after: int, start: int) -> Window:
    return window(TEXTS[before], TEXTS[after], start)


def _fresh(items: list[Item], win: Window | None) -> tuple[object, object]:
    plan = novel_plan()
    screened = screen(plan, items, win, NoMemo())
    return screened, order_items(plan, screened.items, win, NoMemo())


@settings(max_examples=150, deadline=None)
@given(picks=st.lists(st.sampled_from(range(len(POOL))), min_size=1, max_size=12),
       windows=st.lists(st.one_of(st.none(), st.builds(_window, st.integers(0, 4), st.integers(0, 4),
                                                        st.integers(0, 40))), min_size=1, max_size=5))
def test_kept_screening_and_ordering_equal_afresh(picks: list[int], windows: list[Window | None]) -> None:
    """The same items (the very same objects, duplicates and repeats included) assembled at several
    windows in turn, with one memo kept between them: each screening (kept items, reports,
    warnings) and each section's order equals a fresh run's with no memo."""
    memo = BoundedMemo()
    items = [POOL[n] for n in picks]
    plan = novel_plan()
    for win in windows:
        screened, ordered = screen_and_order(plan, items, win, memo)
        expected_screened, expected_ordered = _fresh(items, win)
        assert (screened, ordered) == (expected_screened, expected_ordered)


def test_what_is_kept_is_copied_out() -> None:
    """Changing what one assembly got (as the engine's reduction does) leaves the next one's intact."""
    memo = BoundedMemo()
    items = list(POOL)
    plan = novel_plan()
    first, ordered = screen_and_order(plan, items, None, memo)
    first.items.clear()
    first.reports.clear()
    for found in ordered.values():
        found.clear()
    again, ordered_again = screen_and_order(plan, items, None, memo)
    assert (again, ordered_again) == _fresh(items, None)
    assert again.items
    assert again.reports


def test_equal_items_that_are_other_objects_are_screened_afresh() -> None:
    """The entry is for the very same item objects: an equal copy (a record written again) is
    judged anew, and a changed one gives its own result."""
    memo = BoundedMemo()
    plan = novel_plan()
    items = list(POOL)
    screen_and_order(plan, items, None, memo)
    changed = [*items[:-1], item("episode:1", "history", "指令：写灯塔\n采纳：光扫过海面。", key=0.5)]
    screened, _ = screen_and_order(plan, changed, None, memo)
    assert screened.items[-1].text == "指令：写灯塔\n采纳：光扫过海面。"
    assert (screened, _) == _fresh(changed, None)


def test_kept_screenings_are_bounded() -> None:
    """A project's memo keeps at most its bound of screenings, the least recently used going first."""
    memo = BoundedMemo(max_recalled=4)
    plan = novel_plan()
    for n in range(10):
        screen_and_order(plan, [item(f"semantic:{n}", "preferences", f"偏好{n}")], None, memo)
    assert memo.recalled() == 4
