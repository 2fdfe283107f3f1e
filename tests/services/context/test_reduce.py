"""Graded reduction on small hand-made plans: each step of a section's ladder, cap and fit passes,
the record of every step taken, and the last resort."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

import services.context.reduce as reduce_module
from services.context.engine import assemble
from services.context.memo import BoundedMemo, NoMemo
from services.context.models import Item, Reduction
from services.context.plan import Line, Plan, SectionPlan
from services.context.reduce import apply, cut_chars
from services.errors import InputTooLarge
from tests.services.context.builders import part, plan, request, run, section, size, start, step, thing
from tests.services.context.factory import counter, window

CURSOR = {"en": "[[cursor]]", "zh": "【光标】"}


def _notes(n: int = 6) -> list[Item]:
    return [thing(f"note:{k}", "notes", "notes", f"Note {k}: the keeper limps along the shore.", key=k)
            for k in range(1, n + 1)]


def _ids(items: list[Item]) -> list[str]:
    return [i.id for i in items]


NOTES = plan(section("notes", part("notes")))


# --- drop_lowest ---------------------------------------------------------------------------------


def test_drop_lowest_stops_at_the_floor_of_a_minimum() -> None:
    """With the minimum as floor, the lowest keys go first and the section keeps an item whose drop
    would take it under the floor, even though it is still over the target."""
    state = start(NOTES, _notes())
    full = size(state, "notes")
    floor = state.count(state.text("notes", state.kept["notes"][:3]))  # the three highest keys
    apply(state, "notes", step("notes", "drop_lowest"), 0, floor, None)
    assert _ids(state.kept["notes"]) == ["note:6", "note:5", "note:4"]
    assert size(state, "notes") == floor
    assert [(r.id, r.fate, r.reason) for r in state.reports] == [
        ("note:1", "dropped", "budget"), ("note:2", "dropped", "budget"), ("note:3", "dropped", "budget")]
    assert state.reductions == [Reduction("notes", "drop_lowest", full, floor)]
    assert "notes" in state.truncated


def test_drop_lowest_without_a_floor_stops_as_soon_as_it_fits() -> None:
    """With no floor, items go lowest key first until the section fits the target (no more), and all
    of them when the target is zero."""
    state = start(NOTES, _notes())
    target = state.count(state.text("notes", state.kept["notes"][:2]))
    apply(state, "notes", step("notes", "drop_lowest", floor="none"), target, 0, None)
    assert _ids(state.kept["notes"]) == ["note:6", "note:5"]
    apply(state, "notes", step("notes", "drop_lowest", floor="none"), 0, 0, None)
    assert state.kept["notes"] == []
    assert size(state, "notes") == 0
    assert [r.id for r in state.reports] == [f"note:{k}" for k in range(1, 7)]


def test_drop_lowest_that_already_fits_changes_and_records_nothing() -> None:
    """A section within its target loses nothing and no reduction is recorded."""
    state = start(NOTES, _notes())
    apply(state, "notes", step("notes", "drop_lowest"), size(state, "notes"), 0, None)
    assert (len(state.kept["notes"]), state.reductions, state.reports, state.truncated) == (6, [], [], set())


RULES = plan(section("rules", part("rules", rank="user_first")))


def _rules() -> list[Item]:
    return [thing("rule:1", "rules", "rules", "The keeper never swims.", key=1),
            thing("rule:2", "rules", "rules", "Storms come from the west.", key=9, origin="kg"),
            thing("rule:3", "rules", "rules", "Mira hums when afraid.", key=5),
            thing("rule:4", "rules", "rules", "The lamp is lit at dusk.", key=2, origin="kg")]


def test_key_order_drops_the_lowest_key_and_reverse_the_last_rendered() -> None:
    """Rendered writer's rules first (user_first), ``order: key`` drops the lowest key whatever its
    origin, ``order: reverse`` the item rendered last."""
    state = start(RULES, _rules())
    assert _ids(state.kept["rules"]) == ["rule:3", "rule:1", "rule:2", "rule:4"]
    apply(state, "rules", step("rules", "drop_lowest", floor="none"), size(state, "rules") - 1, 0, None)
    assert [r.id for r in state.reports] == ["rule:1"]
    state = start(RULES, _rules())
    reverse = step("rules", "drop_lowest", floor="none", order="reverse")
    apply(state, "rules", reverse, size(state, "rules") - 1, 0, None)
    assert [r.id for r in state.reports] == ["rule:4"]
    apply(state, "rules", reverse, size(state, "rules") - 1, 0, None)
    assert [r.id for r in state.reports] == ["rule:4", "rule:2"]


def test_origin_filter_drops_only_that_origins_items() -> None:
    """A step limited to ``origin: kg`` drops kg items only, lowest key first, even when the section
    is still over its target afterwards."""
    state = start(RULES, _rules())
    shed = step("rules", "drop_lowest", floor="none", origin="kg", reason="rules_overbudget")
    apply(state, "rules", shed, 0, 0, None)
    assert [(r.id, r.reason) for r in state.reports] == [("rule:4", "rules_overbudget"),
                                                         ("rule:2", "rules_overbudget")]
    assert _ids(state.kept["rules"]) == ["rule:3", "rule:1"]
    assert size(state, "rules") > 0


TWO_PARTS = plan(section("lore", part("a"), part("b")))


def _lore() -> list[Item]:
    return [thing("a:1", "lore", "a", "An old map of the bay.", key=1),
            thing("a:2", "lore", "a", "The tide tables for May.", key=2),
            thing("b:1", "lore", "b", "The keeper's diary, page one.", key=8),
            thing("b:2", "lore", "b", "The keeper's diary, page two.", key=9)]


def test_parts_order_empties_the_first_listed_part_first() -> None:
    """``parts: [b, a]`` drops every item of b (lowest key first) before any of a, whatever the keys."""
    state = start(TWO_PARTS, _lore())
    by_parts = step("lore", "drop_lowest", floor="none", parts=("b", "a"))
    remaining = state.count(state.text("lore", state.kept["lore"][:1]))  # a:2 alone (rendered first)
    apply(state, "lore", by_parts, remaining, 0, None)
    assert [r.id for r in state.reports] == ["b:1", "b:2", "a:1"]
    assert _ids(state.kept["lore"]) == ["a:2"]


def test_a_step_limited_to_parts_leaves_the_others() -> None:
    """A step naming only part a never touches b, even with a target of zero."""
    state = start(TWO_PARTS, _lore())
    apply(state, "lore", step("lore", "drop_lowest", floor="none", parts=("a",)), 0, 0, None)
    assert [r.id for r in state.reports] == ["a:1", "a:2"]
    assert _ids(state.kept["lore"]) == ["b:2", "b:1"]


piece = st.text(alphabet=st.sampled_from(list("abcxyz林远灯塔。.")), min_size=1, max_size=30)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=st.lists(st.tuples(piece, st.integers(0, 5)), min_size=1, max_size=10),
       target_share=st.floats(0, 1), floor_share=st.floats(0, 1), use_floor=st.booleans())
def test_drop_lowest_is_the_one_at_a_time_loop(entries: list[tuple[str, int]], target_share: float,
                                               floor_share: float, use_floor: bool) -> None:
    """For any items, target and floor, drop_lowest drops exactly what dropping the lowest key (then
    the oldest id) one item at a time would: stop once the section fits the target, or before a drop
    that would take it under the floor."""
    items = [thing(f"n:{k}", "notes", "notes", text, key=key) for k, (text, key) in enumerate(entries)]
    state = start(NOTES, items)
    full = size(state, "notes")
    target = int(full * target_share)
    floor = int(full * floor_share) if use_floor else 0
    sequence = sorted(state.kept["notes"], key=lambda i: (i.key, int(i.id.split(":")[1])))

    def size_without(k: int) -> int:
        gone = {i.id for i in sequence[:k]}
        return state.count(state.text("notes", [i for i in state.kept["notes"] if i.id not in gone]))

    expected = 0
    while expected < len(sequence) and size_without(expected) > target:
        if floor and size_without(expected + 1) < floor:
            break
        expected += 1
    screened = len(state.reports)  # duplicates skipped before reduction
    apply(state, "notes", step("notes", "drop_lowest"), target, floor, None)
    assert [r.id for r in state.reports[screened:]] == [i.id for i in sequence[:expected]]


# --- cut_far_end ---------------------------------------------------------------------------------


SCENE = plan(section("scene", part("window", "window", cursor=CURSOR)))
BEFORE = "".join(f"Sentence {k} ends here. " for k in range(80))
AFTER = "".join(f"After {k} goes on. " for k in range(30))


def test_cut_far_end_keeps_the_window_near_the_cursor_on_sentence_bounds() -> None:
    """The window loses the oldest text before the cursor and the end of the text after it, in
    proportion, so the section fits; the text before starts a sentence."""
    state = start(SCENE, window=window(BEFORE, AFTER))
    full = size(state, "scene")
    apply(state, "scene", step("scene", "cut_far_end"), 200, 0, full)
    assert size(state, "scene") <= 200
    assert BEFORE.endswith(state.before)
    assert state.before.startswith("Sentence ")
    assert AFTER.startswith(state.after)
    assert state.after
    assert len(state.after) < len(AFTER)
    assert len(state.before) < len(BEFORE)
    assert state.text("scene") == state.before + "[[cursor]]" + state.after
    assert state.window_cut
    assert "scene" in state.truncated
    assert state.reductions == [Reduction("scene", "cut_far_end", full, size(state, "scene"))]


def test_a_cut_window_is_reported_as_trimmed_with_its_kept_tokens() -> None:
    """Through the engine, a window cut by the budget is one ``window`` report, trimmed for budget,
    keeping what the prompt kept."""
    ladder = plan(section("scene", part("window", "window", cursor=CURSOR),
                          steps=(step("scene", "cut_far_end", floor="none"),)),
                  trim=[step("scene", "cut_far_end", floor="none")], last_resort=["scene"])
    result = run(ladder, window=window(BEFORE, AFTER), total=150)
    (report,) = result.reports
    assert (report.id, report.layer, report.section, report.fate, report.reason) == (
        "window", "scene", "window", "trimmed", "budget")
    assert report.tokens == counter().count(BEFORE) + counter().count(AFTER)
    assert 0 < report.kept_tokens <= result.token_count <= 150
    assert [r.step for r in result.reductions] == ["cut_far_end"]


TEXTS = plan(section("notes", part("a", "text", source="request.a"), part("b", "text", source="request.b")))
A_TEXT = "".join(f"First part {k} ends. " for k in range(20)).strip()
B_TEXT = "".join(f"Second part {k} ends. " for k in range(20)).strip()


def test_cut_far_end_cuts_text_parts_from_the_end_last_part_first() -> None:
    """Without a window, text parts lose their ends, the last part first, each cut on a sentence end."""
    state = start(TEXTS, variables={"a": A_TEXT, "b": B_TEXT})
    whole_a = state.count(A_TEXT)
    apply(state, "notes", step("notes", "cut_far_end"), whole_a + 40, 0, None)
    a, b = state.texts[("notes", "a")], state.texts[("notes", "b")]
    assert a == A_TEXT
    assert B_TEXT.startswith(b)
    assert b.endswith("ends.")
    assert len(b) < len(B_TEXT)
    assert size(state, "notes") <= whole_a + 40
    apply(state, "notes", step("notes", "cut_far_end"), 30, 0, None)
    a, b = state.texts[("notes", "a")], state.texts[("notes", "b")]
    assert b == ""
    assert A_TEXT.startswith(a)
    assert a.endswith("ends.")
    assert size(state, "notes") <= 30
    assert [r.step for r in state.reductions] == ["cut_far_end", "cut_far_end"]


# --- trim_chars ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "chars", "expected"), [
    ("Short.", 40, "Short."),
    ("First one. Second one. Third one.", 25, "First one. Second one."),
    ("First one. Second", 14, "First one."),
    ("No sentence end in sight here", 12, "No sentence "),
    ("第一句。第二句！第三句？第四句", 12, "第一句。第二句！第三句？"),
    ("第一句。第二句！第三句？第四句", 11, "第一句。第二句！"),
    ("他问：“走吗？”她没回答。然后", 10, "他问：“走吗？”"),
    ("「走吧。」她说。然后", 6, "「走吧。」"),
    ("Line one\nline two continues", 15, "Line one"),
])
def test_cut_chars_ends_on_a_sentence_boundary(text: str, chars: int, expected: str) -> None:
    """A text over ``chars`` keeps its head within ``chars`` characters, ending at the last sentence
    end in it (。！？.!? or a line end, with closing quotes); with none, the head is cut as it is."""
    assert cut_chars(text, chars) == expected
    assert len(cut_chars(text, chars)) <= chars


MEMORIES = plan(section("memories", part("m"), part("k"), part("note", "text", source="request.note")))


def test_trim_chars_cuts_each_text_and_reports_the_items_trimmed() -> None:
    """trim_chars cuts every item of its parts and every text part to ``chars`` characters; cut items
    are reported trimmed (reason: the step) with their new count; untouched parts stay whole."""
    long_text = "The keeper climbs the stairs. He lights the lamp. Then he waits for dawn."
    other = "Mira climbs the stairs after him. She carries the oil. She waits below."
    items = [thing("m:1", "memories", "m", long_text, key=2), thing("m:2", "memories", "m", "Short.", key=1),
             thing("k:1", "memories", "k", other, key=1)]
    trim = step("memories", "trim_chars", chars=40, parts=("m", "note"))
    the_plan = plan(section("memories", *MEMORIES.sections[0].parts, steps=(trim,)), trim=[trim],
                    last_resort=["memories"])
    uncut = run(the_plan, items, variables={"note": long_text})
    result = run(the_plan, items, variables={"note": long_text}, total=uncut.token_count - 1)
    fates = {r.id: (r.fate, r.reason, r.kept_tokens) for r in result.reports}
    cut = "The keeper climbs the stairs."
    assert fates == {"m:1": ("trimmed", "trim_chars", counter().count(cut)), "m:2": ("included", None, 2),
                     "k:1": ("included", None, counter().count(other))}
    assert result.layers["memories"].text == f"{cut}\n\nShort.\n\n{other}\n\n{cut}"
    assert result.layers["memories"].truncated
    (reduction,) = result.reductions
    assert (reduction.section, reduction.step) == ("memories", "trim_chars")
    assert (reduction.tokens_before, reduction.tokens_after) == (uncut.token_count, result.token_count)


# --- summary_cue ---------------------------------------------------------------------------------


HISTORY = plan(section("history", part("turns"), part("summary", "text", content=())))


def _turns() -> list[Item]:
    return [thing(f"turn:{k}", "history", "turns", f"Turn {k}: the keeper said something long again.", key=k)
            for k in range(1, 5)]


def test_summary_cue_with_a_cue_replaces_the_section_by_it() -> None:
    """With a cue, every item of the section goes (with the step's reason) and the section shows only
    the cue, in the request's language, where its first text part is."""
    state = start(HISTORY, _turns(), language="zh")
    full = size(state, "history")
    cue = step("history", "summary_cue", reason="summarized",
               cue={"en": "(Earlier turns omitted.)", "zh": "（省略了先前的对话。）"})
    apply(state, "history", cue, 0, 0, full)
    assert state.text("history") == "（省略了先前的对话。）"
    assert state.kept["history"] == []
    assert {(r.id, r.reason) for r in state.reports} == {(f"turn:{k}", "summarized") for k in range(1, 5)}
    assert state.reductions == [Reduction("history", "summary_cue", full, size(state, "history"))]


def test_summary_cue_needs_no_text_part_and_names_its_reason() -> None:
    """A section of items alone is replaced by its cue too (not emptied), in its first part's
    format, and the items it replaced are reported as gone for the summary cue."""
    cue = step("history", "summary_cue", cue={"en": "(Earlier turns omitted.)"})
    only_items = plan(section("history", part("turns")), trim=[cue],
                      last_resort=["history"])
    result = run(only_items, _turns(), total=20)
    assert result.prompt == "(Earlier turns omitted.)"
    assert {(r.id, r.reason) for r in result.reports if r.fate == "dropped"} == {
        (f"turn:{k}", "summary_cue") for k in range(1, 5)}
    assert [(r.section, r.step) for r in result.reductions] == [("history", "summary_cue")]


def test_summary_cue_with_chars_shortens_long_texts_with_an_ellipsis() -> None:
    """With ``chars``, each text longer than it is cut (on a sentence end if one is in it) to fit
    ``chars`` with a closing ellipsis; shorter texts stay as they are."""
    items = [thing("turn:1", "history", "turns", "Short turn.", key=2),
             thing("turn:2", "history", "turns", "A long turn. It goes on and on past the limit.", key=1)]
    state = start(HISTORY, items)
    apply(state, "history", step("history", "summary_cue", chars=20), 0, 0, None)
    texts = [i.text for i in state.kept["history"]]
    assert texts == ["Short turn.", "A long turn.…"]
    assert all(len(t) <= 20 for t in texts)
    assert [r.step for r in state.reductions] == ["summary_cue"]
    assert list(state.trimmed_items.values()) == ["summary_cue"]


# --- lower_tier ----------------------------------------------------------------------------------


NPCS = plan(section("npcs", part("npc")))


def _npcs() -> list[Item]:
    def npc(group: str | None, tier: int | None, key: float) -> Item:
        text = f"{group} at tier {tier}: a description of some length."
        return thing(f"{group}:{tier}", "npcs", "npc", text, key=key, group=group, tier=tier)

    return [npc("keeper", 0, 9), npc("keeper", 1, 8), npc("keeper", 2, 7), npc("mira", 0, 6),
            npc("mira", 1, 5), npc("ghost", 0, 4), npc(None, None, 3)]


def test_lower_tier_drops_the_highest_tier_of_every_group_at_once() -> None:
    """One round drops the highest tier of every group that has more than one; it stops as soon as the
    section fits, so lower tiers stay."""
    state = start(NPCS, _npcs())
    full = size(state, "npcs")
    apply(state, "npcs", step("npcs", "lower_tier"), full - 1, 0, full)
    assert [(r.id, r.reason) for r in state.reports] == [("keeper:2", "lower_tier"), ("mira:1", "lower_tier")]
    assert _ids(state.kept["npcs"]) == ["keeper:0", "keeper:1", "mira:0", "ghost:0", "None:None"]
    assert state.reductions == [Reduction("npcs", "lower_tier", full, size(state, "npcs"))]


def test_lower_tier_goes_one_tier_at_a_time_and_keeps_each_groups_last() -> None:
    """Further rounds lower each group one more tier; a group's last tier and untiered items are never
    dropped by it, even when the section is still over."""
    state = start(NPCS, _npcs())
    apply(state, "npcs", step("npcs", "lower_tier"), 0, 0, None)
    assert [r.id for r in state.reports] == ["keeper:2", "mira:1", "keeper:1"]
    assert _ids(state.kept["npcs"]) == ["keeper:0", "mira:0", "ghost:0", "None:None"]
    assert size(state, "npcs") > 0
    assert len(state.reductions) == 1


# --- drop_section --------------------------------------------------------------------------------


def test_drop_section_removes_items_texts_and_window() -> None:
    """drop_section empties the section: items go as ``section_dropped``, text parts and the window
    with them; an empty section is not dropped again."""
    the_plan = plan(section("scene", part("notes"), part("lead", "text", content=(Line("Lead."),)),
                            part("window", "window", cursor=CURSOR)))
    state = start(the_plan, [thing("n:1", "scene", "notes", "A note.")], window=window("Before.", "After."))
    full = size(state, "scene")
    apply(state, "scene", step("scene", "drop_section"), 0, 0, None)
    assert state.text("scene") == ""
    assert [(r.id, r.reason) for r in state.reports] == [("n:1", "section_dropped")]
    assert (state.before, state.after, state.window_cut) == ("", "", True)
    apply(state, "scene", step("scene", "drop_section"), 0, 0, None)
    assert state.reductions == [Reduction("scene", "drop_section", full, 0)]


# --- the passes ----------------------------------------------------------------------------------


def _capped(max_tokens: int | None, warning: str | None = None) -> Plan:
    shed = step("lore", "drop_lowest", "shed", target="cap", floor="none", warn="overbudget")
    return plan(section("lore", part("facts"), max=max_tokens, steps=(shed,), overbudget_warning=warning),
                section("rest", part("other")), trim=[shed])


def _facts() -> list[Item]:
    return [thing(f"fact:{k}", "lore", "facts", f"Fact {k}: the lighthouse was built long ago.", key=k)
            for k in range(1, 6)]


def test_a_cap_step_does_nothing_within_the_cap() -> None:
    """Within its cap (and the total) a section keeps everything: no reduction, no warning."""
    result = run(_capped(10_000), _facts())
    assert (result.reductions, result.warnings) == ((), ())
    assert all(r.fate == "included" for r in result.reports)


def test_a_cap_step_runs_over_the_cap_even_when_the_total_fits_and_warns() -> None:
    """Over its cap a section is cut to it by its cap step, although the prompt fits the total, with
    its overbudget warning (``{tokens}`` and ``{cap}`` filled in) once."""
    full = run(_capped(10_000), _facts()).layers["lore"].tokens
    result = run(_capped(30, "LORE_OVERBUDGET: {tokens} > {cap}"), _facts())
    assert result.warnings == (f"LORE_OVERBUDGET: {full} > 30",)
    (reduction,) = result.reductions
    assert reduction == Reduction("lore", "shed", full, result.layers["lore"].tokens)
    assert reduction.tokens_after <= 30
    assert [r.id for r in result.reports if r.fate == "dropped"] == ["fact:1", "fact:2", "fact:3"]


def test_an_overbudget_section_warns_every_time_and_logs_once_per_size() -> None:
    """Every assembly of a section over its cap carries the warning; the server's log gets a line
    when the section's size is new to the project's memo, not one per keystroke."""
    memo = BoundedMemo()
    with capture_logs() as logs:
        for facts in (_facts(), _facts(), _facts()[:4], _facts()):
            result = assemble(request(_capped(30), facts), counter(), memo)
            assert len(result.warnings) == 1
    assert [e["tokens"] for e in logs if e["event"] == "context.lore_overbudget"] == [
        run(_capped(10_000), _facts()).layers["lore"].tokens,
        run(_capped(10_000), _facts()[:4]).layers["lore"].tokens]


def test_the_default_overbudget_warning_names_section_tokens_and_cap() -> None:
    """A section without its own overbudget text warns CONTEXT_SECTION_OVERBUDGET."""
    full = run(_capped(10_000), _facts()).layers["lore"].tokens
    result = run(_capped(30), _facts())
    assert result.warnings == (f"CONTEXT_SECTION_OVERBUDGET: lore uses {full} tokens, its cap is 30",)


def test_a_section_over_its_share_but_within_its_minimum_warns_and_keeps_everything() -> None:
    """Spec 004: a section past its share of the total warns (naming the share), though its minimum
    keeps its cap step from shedding anything; within its share it is silent."""
    shed = step("lore", "drop_lowest", "shed", target="cap", floor="none", warn="overbudget")
    full = run(_capped(10_000), _facts()).layers["lore"].tokens
    guarded = plan(section("lore", part("facts"), ratio=0.1, minimum=full + 10, steps=(shed,),
                           overbudget_warning="LORE_OVERBUDGET: {tokens} > {cap}"),
                   section("rest", part("other")), trim=[shed])
    total = 10 * full - 50  # a share of total // 10, under the section's size
    result = run(guarded, _facts(), total=total)
    assert result.warnings == (f"LORE_OVERBUDGET: {full} > {total // 10}",)
    assert (result.reductions, [r.fate for r in result.reports]) == ((), ["included"] * 5)
    assert run(guarded, _facts(), total=10 * full + 50).warnings == ()


def _ladder() -> Plan:
    first = step("a", "drop_lowest", "to_minimum")
    second = step("b", "drop_lowest", "to_minimum")
    below = step("a", "drop_lowest", "below_minimum", floor="none", warn="below_minimum")
    return plan(section("a", part("x"), minimum=20, steps=(first, below)),
                section("b", part("y"), minimum=0, steps=(second,)),
                trim=[first, second, below], last_resort=["a", "b"])


def _xy() -> list[Item]:
    return [*(thing(f"x:{k}", "a", "x", f"Item x{k}: the keeper walks the beach at night.", key=k)
              for k in range(1, 6)),
            *(thing(f"y:{k}", "b", "y", f"Item y{k}: the storm returns over the bay.", key=k)
              for k in range(1, 6))]


def test_fit_steps_run_in_trim_order_and_each_is_recorded() -> None:
    """Over the total, the trim list runs in order: a to its minimum, then b, then a below its minimum
    (with CONTEXT_BELOW_MINIMUM), stopping once the prompt fits; each step is recorded with the
    section's tokens before and after, and the last of each section ends at its final count. A drop
    on a section not counted before it gives the count after plus what it dropped, flagged estimated."""
    everything = run(_ladder(), _xy())
    result = run(_ladder(), _xy(), total=15)
    assert result.token_count <= 15
    assert [(r.section, r.step) for r in result.reductions] == [
        ("a", "to_minimum"), ("b", "to_minimum"), ("a", "below_minimum")]
    assert "CONTEXT_BELOW_MINIMUM: a cut below its minimum" in result.warnings
    before = {sid: layer.tokens for sid, layer in everything.layers.items()}
    for reduction in result.reductions:
        if reduction.estimated:
            assert reduction.tokens_before > reduction.tokens_after
        else:
            assert reduction.tokens_before == before[reduction.section] > reduction.tokens_after
        before[reduction.section] = reduction.tokens_after
    assert before == {sid: layer.tokens for sid, layer in result.layers.items()}


def test_fit_stops_at_the_first_step_that_suffices() -> None:
    """When a's first step makes the prompt fit, b and the later steps are not run."""
    everything = run(_ladder(), _xy())
    result = run(_ladder(), _xy(), total=everything.token_count - 5)
    assert [(r.section, r.step) for r in result.reductions] == [("a", "to_minimum")]
    assert not result.layers["b"].truncated
    assert result.warnings == ()


def _last_resort_plan(never: bool = False) -> Plan:
    return plan(section("a", part("x"), never=never),
                section("b", part("y"), truncated_warning="B_TRUNCATED: b was cut"),
                section("c", part("fixed", "text", content=(Line("A fixed line that is never cut."),))),
                last_resort=["b", "a"])


def test_last_resort_cuts_sections_in_its_order_one_at_a_time() -> None:
    """With no ladder to run, the exact count is brought under the total by the last resort: the first
    listed section loses its lowest items, with its truncated warning; the next is untouched while the
    first can absorb the excess."""
    everything = run(_last_resort_plan(), _xy())
    result = run(_last_resort_plan(), _xy(), total=everything.token_count - 5)
    assert result.token_count <= everything.token_count - 5
    assert [(r.section, r.step) for r in result.reductions] == [("b", "last_resort")]
    assert result.warnings == ("B_TRUNCATED: b was cut",)
    assert [r.id for r in result.reports if r.fate == "dropped"] == ["y:1"]
    assert not result.layers["a"].truncated


def test_last_resort_moves_on_when_a_section_is_empty() -> None:
    """When the first section cannot absorb the excess it is emptied and the next one is cut; a
    section without a truncated warning adds none, unless it is marked never (then the generic
    CONTEXT_SECTION_TRUNCATED)."""
    fixed = run(_last_resort_plan(), []).token_count
    result = run(_last_resort_plan(), _xy(), total=fixed + 30)
    assert result.token_count <= fixed + 30
    assert result.layers["b"].text == ""
    assert [r.section for r in result.reductions][:1] == ["b"]
    assert "a" in {r.section for r in result.reductions}
    assert result.warnings == ("B_TRUNCATED: b was cut",)
    never = run(_last_resort_plan(never=True), _xy(), total=fixed + 30)
    assert never.warnings == ("B_TRUNCATED: b was cut", "CONTEXT_SECTION_TRUNCATED: a cut to fit the budget")


def test_fixed_text_over_the_total_is_input_too_large() -> None:
    """When what the last resort cannot cut (text parts) is over the total alone, the request fails."""
    fixed = run(_last_resort_plan(), []).token_count
    with pytest.raises(InputTooLarge):
        run(_last_resort_plan(), _xy(), total=fixed - 1)


def test_section_plans_are_unchanged_by_reduction() -> None:
    """Reduction works on the state, never on the plan: the same plan assembles the same prompt again."""
    the_plan = _ladder()
    sections: tuple[SectionPlan, ...] = the_plan.sections
    first = run(the_plan, _xy(), total=40)
    again = run(the_plan, _xy(), total=40)
    assert the_plan.sections is sections
    assert (first.prompt, first.reductions) == (again.prompt, again.reductions)


def test_one_step_drops_from_several_parts_each_in_its_order_and_for_its_reason() -> None:
    """A step naming several parts drops from them in that order, each part sorted its own way (reverse
    render order for one, lowest key for the other) and each drop giving its part's reason."""
    shed = step("s", "drop_lowest", parts=("a", "b"), floor="none",
                part_orders={"a": "reverse", "b": "key"}, part_reasons={"a": "from_a", "b": "from_b"})
    two = plan(section("s", part("a"), part("b")), trim=[shed], last_resort=["s"])
    items = [thing("a:1", "s", "a", "Alpha one is a line.", key=0.5),
             thing("a:2", "s", "a", "Alpha two.", key=0.5),
             thing("b:1", "s", "b", "Beta one is a line.", key=0.2),
             thing("b:2", "s", "b", "Beta two.", key=0.1)]
    state = start(two, items)
    apply(state, "s", replace(shed, target="fit"), 0, 0, None)
    assert [(r.id, r.reason) for r in state.reports] == [
        ("a:2", "from_a"), ("a:1", "from_a"), ("b:2", "from_b"), ("b:1", "from_b")]


# --- a cap's drop kept in the memo ----------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=st.lists(st.tuples(piece, st.integers(0, 5)), min_size=1, max_size=10),
       caps=st.lists(st.integers(0, 120), min_size=1, max_size=4), orders=st.randoms(use_true_random=False))
def test_a_caps_drop_kept_in_the_memo_is_the_drop_counted_afresh(
        entries: list[tuple[str, int]], caps: list[int], orders: Any) -> None:
    """Assemblies that share a project's memo cut a capped section exactly as one without a memo
    does, whatever the cap (a share of the total), for the same items again (cut from the memo,
    without counting) and for the same items in another order or one fewer (cut afresh)."""
    items = [thing(f"n:{k}", "lore", "facts", text, key=key) for k, (text, key) in enumerate(entries)]
    lists = [items, items, list(reversed(items)), items[:-1] or items]
    memo, tokens = BoundedMemo(), counter()  # one project's memo, token counter and plan
    shed = step("lore", "drop_lowest", "shed", target="cap", floor="none", warn="overbudget")
    capped = plan(section("lore", part("facts"), ratio=0.5, steps=(shed,)), section("rest", part("other")),
                  trim=[shed])
    counted: list[int] = []
    real = reduce_module._drops_needed

    def counting(*args: Any, **kwargs: Any) -> tuple[int, int, int | None]:
        counted.append(1)
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reduce_module, "_drops_needed", counting)
        for cap in caps:
            for kept in (*lists, orders.sample(items, len(items))):
                alone = assemble(request(capped, kept, total=2 * cap + 2), counter(), NoMemo())
                before = len(counted)
                shared = assemble(request(capped, kept, total=2 * cap + 2), tokens, memo)
                again = assemble(request(capped, kept, total=2 * cap + 2), tokens, memo)
                for result in (shared, again):
                    assert (result.prompt, result.token_count, result.reductions, result.warnings) == (
                        alone.prompt, alone.token_count, alone.reductions, alone.warnings)
                assert len(counted) - before <= 1  # the second assembly's drop came from the memo
