"""Screening before budgeting: foreign items fail, malformed ones and duplicates are skipped."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from services.context.memo import BoundedMemo, NoMemo
from services.context.models import Item, ItemReport, Window
from services.context.screening import MAX_RETRIEVED, Screened, check_scope, dropped
from services.context.screening import screen as screen_plan
from services.errors import ScopeViolation
from tests.services.context.factory import PROJECT, item, novel, window


def screen(items: Sequence[Item], win: Window | None) -> Screened:
    """Screening as the novel plan drives it (each part's ``dedupe`` and section's ``candidates``)."""
    return screen_plan(novel(), items, win, NoMemo())


def _fates(reports: list[ItemReport]) -> dict[str, tuple[str, str | None]]:
    return {r.id: (r.fate, r.reason) for r in reports}


def test_foreign_item_fails_the_request_and_is_logged() -> None:
    """An item of another project raises CONTEXT_SCOPE_VIOLATION and logs security.scope_violation."""
    items = [item("c1", "constraints", "规则"), item("r9", "passages", "别人的书", project_id="project-b")]
    with capture_logs() as logs, pytest.raises(ScopeViolation) as raised:
        check_scope(items, PROJECT)
    assert raised.value.data_code == "CONTEXT_SCOPE_VIOLATION"
    assert raised.value.fields == {"layer": "retrieved", "itemId": "r9"}
    assert logs == [{"event": "security.scope_violation", "log_level": "warning", "project_id": PROJECT,
                     "item_id": "r9", "item_project_id": "project-b", "layer": "retrieved",
                     "source": "passages"}]


def test_own_items_pass_the_scope_check() -> None:
    """Items of the requesting project pass silently."""
    with capture_logs() as logs:
        check_scope([item("c1", "constraints", "规则")], PROJECT)
    assert logs == []


def test_malformed_items_are_skipped_with_one_warning() -> None:
    """Negative tokens, blank text, an unknown section or a NaN key: each skipped as invalid, one warning."""
    good = item("p1", "passages", "灯塔")
    items = [
        dataclasses.replace(good, id="neg", tokens=-1),
        dataclasses.replace(good, id="blank", text=" \n\t"),
        dataclasses.replace(good, id="section", section="constraints"),
        dataclasses.replace(good, id="nan", key=math.nan),
        good,
    ]
    result = screen(items, None)
    assert result.items == [good]
    assert _fates(result.reports) == dict.fromkeys(("neg", "blank", "section", "nan"), ("dropped", "invalid"))
    assert result.warnings == ["CONTEXT_LAYER_INVALID: 4 malformed item(s) skipped"]
    assert next(r for r in result.reports if r.id == "neg").tokens == 0


def test_no_warning_without_malformed_items() -> None:
    """Duplicates alone do not warn."""
    result = screen([item("p1", "passages", "A"), item("p1", "passages", "B")], None)
    assert (result.warnings, _fates(result.reports)) == ([], {"p1": ("dropped", "duplicate")})


def test_repeated_content_is_a_duplicate_whatever_the_whitespace() -> None:
    """A second item with the same text up to whitespace is skipped, across Settings and Retrieved."""
    first = item("s1", "preferences", "动作场景 偏好短句")
    items = [first, item("s2", "preferences", "动作场景偏好\n短句"),
             item("p1", "passages", "动作场景偏好短句")]
    result = screen(items, None)
    assert result.items == [first]
    assert _fates(result.reports) == {"s2": ("dropped", "duplicate"), "p1": ("dropped", "duplicate")}


def test_rules_with_equal_text_are_not_deduplicated_by_content() -> None:
    """Rules items are deduplicated by id only: two constraints may share wording."""
    items = [item("c1", "constraints", "不可杀人"), item("c2", "constraints", "不可杀人"),
             item("c1", "constraints", "不可杀人")]
    result = screen(items, None)
    assert [i.id for i in result.items] == ["c1", "c2"]
    assert _fates(result.reports) == {"c1": ("dropped", "duplicate")}


def test_retrieved_overlapping_the_window_is_a_duplicate() -> None:
    """A retrieved passage whose span overlaps the window, or whose text the window holds, is skipped."""
    win = window("海风灌进来。林远站在台阶上。", "他没有说话。", start=100)  # covers [100, 120)
    items = [
        item("inside", "passages", "别的段落", span=(110, 130)),
        item("touching", "passages", "紧挨着的段落", span=(120, 140)),
        item("before", "passages", "更早的段落", span=(40, 100)),
        item("quoted", "passages", "林远 站在台阶上"),
        item("pref", "preferences", "林远站在台阶上"),
        item("entity", "entities", "林远站在台阶上"),
    ]
    result = screen(items, win)
    assert [i.id for i in result.items] == ["touching", "before", "pref", "entity"]
    assert _fates(result.reports) == {"inside": ("dropped", "duplicate"), "quoted": ("dropped", "duplicate")}


def test_a_past_interaction_repeating_the_window_is_a_duplicate() -> None:
    """A past interaction whose accepted output the window holds, or whose output holds the whole
    window, is skipped as a duplicate; one that only shares a few words with it stays."""
    win = window("海风灌进来。林远站在台阶上。", "他没有说话。")
    shown = dataclasses.replace  # the factory has no quote: set it as the provider does
    items = [
        shown(item("accepted", "history", "指令：继续写\n采纳：林远站在台阶上。"), quote="林远站在台阶上。"),
        shown(item("longer", "history", "指令：继续写\n采纳：……"),
              quote="天亮了。海风灌进来。林远站在台阶上。他没有说话。然后他走了。"),
        shown(item("other", "history", "指令：继续写\n采纳：林远想起了那把钥匙。"),
              quote="林远想起了那把钥匙。"),
    ]
    result = screen(items, win)
    assert [i.id for i in result.items] == ["other"]
    assert _fates(result.reports) == {"accepted": ("dropped", "duplicate"),
                                      "longer": ("dropped", "duplicate")}
    assert [i.id for i in screen(items, window("", "")).items] == ["accepted", "longer", "other"]


def test_retrieved_candidates_are_capped_lowest_score_first() -> None:
    """Past 200 retrieved candidates, the lowest-scoring ones are dropped as candidate_limit."""
    assert novel().section("retrieved").candidates == MAX_RETRIEVED
    extra = 5
    items = [item(f"p{n:03d}", "passages", f"段落{n}", key=n / 1000) for n in range(MAX_RETRIEVED + extra)]
    items.append(item("s1", "preferences", "偏好"))
    result = screen(items, None)
    assert len(result.items) == MAX_RETRIEVED + 1
    assert _fates(result.reports) == {f"p{n:03d}": ("dropped", "candidate_limit") for n in range(extra)}


_PARTS = ("passages", "history", "preferences", "constraints")
_ITEMS = st.lists(st.tuples(st.integers(0, 260), st.sampled_from(_PARTS),
                            st.sampled_from(["雾", "灯塔", " ", "海风"]),
                            st.sampled_from([0.0, 0.25, 0.5, -0.0, 1.0]),
                            st.sampled_from([None, (0, 5), (50, 60)]), st.sampled_from([3, -1])),
                  max_size=60)


@settings(max_examples=60, deadline=None)
@given(_ITEMS, st.integers(0, 2), st.sampled_from([0, MAX_RETRIEVED]))
def test_screening_without_reports_keeps_and_caps_the_very_same_items(specs: list[tuple[
        int, str, str, float, tuple[int, int] | None, int]], copies: int, filler: int) -> None:
    """Asked for no reports (context:assemble), screening keeps the same items in the same order,
    warns the same and marks the same sections as capped as when it reports every skipped item:
    whatever the duplicates, knock-outs, malformed items and ties at the candidate limit."""
    items = [item(f"i{n}", part, text * (1 + n % 5) + "。" * copies, key, span=span, tokens=tokens)
             for n, part, text, key, span, tokens in specs]
    items += [item(f"f{n}", "passages", f"段落{n}", (0.0, 0.5, 1.0)[n % 3]) for n in range(filler)]
    win = window("灯塔灯塔。海风", start=0)
    told = screen_plan(novel(), items, win, NoMemo())
    quiet = screen_plan(novel(), items, win, NoMemo(), explain=False)
    assert [id(i) for i in quiet.items] == [id(i) for i in told.items]
    assert quiet.warnings == told.warnings
    assert quiet.capped == told.capped == {r.layer for r in told.reports if r.reason == "candidate_limit"}
    assert quiet.reports == []


def test_dropped_report_carries_the_item_and_reason() -> None:
    """A dropped report copies the item's identity and ordering key, with no kept tokens."""
    source = item("p1", "passages", "灯塔", key=0.7, tokens=12)
    assert dropped(source, "budget") == ItemReport(
        id="p1", layer="retrieved", section="passages", source="passages", tokens=12, key=0.7,
        key_name="score", fate="dropped", reason="budget", kept_tokens=0)


def test_the_window_text_is_not_kept_in_the_memo_but_the_candidates_are() -> None:
    """The text around the cursor is new at every assembly, so screening normalizes it without
    keeping it: the project's memo holds the candidates' texts, which come back, and a window found
    whole inside a candidate still makes that candidate a duplicate."""
    memo = BoundedMemo()
    win = window("我推开门，海风很冷。", "台阶很长。")
    chunk = item("r1", "passages", "我推开门， 海风很冷。", 0.9)
    kept = item("r2", "passages", "钥匙藏在第三级台阶下。", 0.8)
    result = screen_plan(novel(), [chunk, kept], win, memo)
    assert [i.id for i in result.items] == ["r2"]
    assert _fates(result.reports) == {"r1": ("dropped", "duplicate")}
    assert set(memo._norms) == {chunk.text, kept.text}
