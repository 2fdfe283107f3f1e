"""Candidates that can never fit, set apart before ordering: the same answer, less work."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.context import precut
from services.context.budget import make_budget
from services.context.engine import Request, assemble
from services.context.memo import NoMemo
from services.context.models import Assembly, BudgetProfile, Item
from services.context.plan import Plan
from tests.services.context.builders import part, plan, request, section, step, thing
from tests.services.context.factory import PROJECT, counter, item, novel_plan, window

CHUNK = "灯塔的第三级台阶下藏着一把生锈的钥匙，海风从门缝里灌进来。"


def _outcome(result: Assembly) -> tuple[object, ...]:
    """Everything an assembly answers but its candidates' reports."""
    return (result.prompt, result.token_count, result.prefix_hashes, result.layers, result.warnings,
            result.reductions, result.stable_ends, result.part_texts)


def _same_as_explained(request: Request) -> bool:
    """Whether the request answers as it does when explained (every candidate ordered and fitted)."""
    explained = assemble(replace(request, explain=True), counter())
    return _outcome(assemble(request, counter())) == _outcome(explained)


def _request(items: tuple[Item, ...], context_window: int = 1500, before: str = CHUNK * 8,
             plan_: Plan | None = None) -> Request:
    profile = BudgetProfile(context_window=context_window, output_reserve=100)
    return Request(project_id=PROJECT, language="zh", plan=plan_ or novel_plan(profile), profile=profile,
                   system_prompt_tokens=30, items=items, window=window(before), explain=False)


def _passages(count: int, repeat: int = 6) -> tuple[Item, ...]:
    return tuple(item(f"chunk:d#{n}", "passages", f"{n}:{CHUNK * repeat}", key=(n % 17) / 17)
                 for n in range(count))


def test_the_novel_plan_sets_apart_from_retrieved_only() -> None:
    """In the novel plan the first fit step is Retrieved's drop to its minimum, in key order."""
    found = precut.first_drop(novel_plan())
    assert found is not None
    assert (found.section, found.id, found.step) == ("retrieved", "to_minimum", "drop_lowest")


@pytest.mark.parametrize("steps", [
    [step("a", "trim_chars")],  # the first fit step cuts texts: more items may fit after it
    [step("a", "drop_lowest", order="reverse")],  # not in key order
    [step("a", "drop_lowest", keep=1)],
    [step("a", "drop_lowest", groups=True)],
    [step("a", "drop_lowest", target="cap"), step("a", "drop_lowest")],  # counted whole by its cap
    [step("w", "drop_lowest")],  # the window's section
    [],
])
def test_no_section_is_set_apart_when_its_first_step_might_keep_what_the_bound_excludes(
        steps: list[object]) -> None:
    """Only a key-order drop of whole items that runs first, on a section nothing counted whole
    before, may lose its lowest candidates before ordering."""
    shape = plan(section("a", part("x")), section("b", part("y")),
                 section("w", part("window", "window")), trim=steps)  # type: ignore[arg-type]
    assert precut.first_drop(shape) is None


def test_a_section_whose_drops_are_logged_by_id_sets_nothing_apart() -> None:
    """An audited part logs the ids its drops remove, in the order they go: tied items set apart
    could be named in another order, so such a section keeps every candidate."""
    shape = plan(section("a", part("x", audit=True)), trim=[step("a", "drop_lowest")])
    assert precut.first_drop(shape) is None


@pytest.mark.parametrize("parts", [("y", "x"), ("x", "y"), None])
def test_a_step_over_several_parts_sets_apart_in_its_own_part_order(parts: tuple[str, ...] | None) -> None:
    """A step that lists parts drops one part after the other: what is set apart is the start of that
    order; every answer is the explained one."""
    shape = plan(section("a", part("x"), part("y")), section("b", part("z")),
                 trim=[step("a", "drop_lowest", parts=parts), step("b", "drop_lowest")])
    items = [thing(f"x:{n}", "a", "x", f"{n} {CHUNK * 2}", key=(n % 4) / 4) for n in range(30)]
    items += [thing(f"y:{n}", "a", "y", f"{n} {CHUNK * 2}", key=(n % 3) / 3) for n in range(30)]
    items += [thing(f"z:{n}", "b", "z", CHUNK, key=n) for n in range(3)]
    the_request = replace(request(shape, items, total=900), explain=False)
    budget = make_budget(the_request.profile, shape, 0)
    kept, tail = precut.split(shape, budget, items, NoMemo())
    assert tail is not None
    if parts is not None:  # the first part listed goes first, whole, then the next
        order = [i.section for i in tail.items]
        assert order == sorted(order, key=parts.index)
        assert parts[1] not in order or order.count(parts[0]) == 30
    assert len(kept) + len(tail.items) == len(items)
    assert _same_as_explained(the_request)


def test_candidates_the_step_orders_as_equals_are_never_split() -> None:
    """Items of equal key whose ids name the same number (``x:1``, ``x:01``) may go in either order:
    when all of them tie, nothing is set apart."""
    shape = plan(section("a", part("x")), trim=[step("a", "drop_lowest")])
    items = [thing(f"x:{'0' * n}1", "a", "x", f"{n} {CHUNK * 2}") for n in range(40)]
    the_request = replace(request(shape, items, total=300), explain=False)
    assert precut.split(shape, make_budget(the_request.profile, shape, 0), items, NoMemo())[1] is None
    assert _same_as_explained(the_request)


def test_only_the_first_fit_step_may_set_candidates_apart() -> None:
    """A later section's drop runs after steps that count it whole as the rest of the prompt."""
    shape = plan(section("a", part("x")), section("b", part("y")),
                 trim=[step("b", "drop_lowest", "first"), step("a", "drop_lowest", "second")])
    found = precut.first_drop(shape)
    assert found is not None
    assert (found.section, found.id) == ("b", "first")


def test_split_keeps_the_highest_candidates_over_the_bound_and_sets_the_rest_apart_lowest_first() -> None:
    """The tail holds the lowest candidates in the order the step drops them; what is kept holds more
    tokens than the bound and keeps the items of other sections and their order."""
    passages = _passages(60)
    rule = item("constraint:1", "constraints", "严格第一人称叙述", key=10)
    request = _request((rule, *passages))
    budget = make_budget(request.profile, request.plan, request.system_prompt_tokens)
    kept, tail = precut.split(request.plan, budget, request.items, NoMemo())
    assert tail is not None
    assert tail.section == "retrieved"
    assert kept[0] is rule
    assert [i.key for i in tail.items] == sorted(i.key for i in tail.items)
    assert max(i.key for i in tail.items) <= min(i.key for i in kept if i.layer == "retrieved")
    assert sum(i.tokens for i in kept if i.layer == "retrieved") > budget.total
    assert len(kept) + len(tail.items) == len(request.items)


def test_split_sets_nothing_apart_when_everything_might_fit() -> None:
    """Candidates that hold fewer tokens than the total all stay."""
    request = _request(_passages(3, repeat=1), context_window=8000)
    budget = make_budget(request.profile, request.plan, request.system_prompt_tokens)
    kept, tail = precut.split(request.plan, budget, request.items, NoMemo())
    assert tail is None
    assert kept == list(request.items)


def test_assembly_with_candidates_set_apart_answers_as_with_all_ordered() -> None:
    """Many passages over a small budget: the retrieved step's reduction (its estimated size before)
    and everything else match the explained assembly, which orders every candidate."""
    request = _request(_passages(120))
    unexplained = assemble(request, counter())
    explained = assemble(replace(request, explain=True), counter())
    assert _outcome(unexplained) == _outcome(explained)
    retrieved = [r for r in unexplained.reductions if r.section == "retrieved"]
    assert retrieved
    assert retrieved[0].estimated


def test_counts_that_overstate_put_the_candidates_back_in_order() -> None:
    """Items claiming far more tokens than their text holds pass the split's guess, but the rest fits
    its target: every candidate is ordered back in and fitted as without the split."""
    passages = tuple(replace(p, tokens=p.tokens * 40) for p in _passages(40, repeat=1))
    request = _request(passages, context_window=3000)
    budget = make_budget(request.profile, request.plan, request.system_prompt_tokens)
    assert precut.split(request.plan, budget, request.items, NoMemo())[1] is not None
    assert _same_as_explained(request)


def test_a_section_needed_whole_before_its_drop_gets_its_candidates_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Should a step of another section count the one with candidates set apart (a plan shape that
    ``first_drop`` rules out), they are put back first: the answer does not change."""
    profile = BudgetProfile(context_window=1500, output_reserve=100)
    novel = novel_plan(profile)
    settings_step = next(s for s in novel.trim if s.section == "settings" and s.target == "fit")
    monkeypatch.setattr(precut, "first_drop", lambda plan: settings_step)
    items = tuple(item(f"pref:{n}", "preferences", f"{n}:{CHUNK * 3}", key=(n % 5) / 5) for n in range(40))
    request = _request((*items, *_passages(30)), plan_=novel)
    assert _same_as_explained(request)


piece = st.text(alphabet=st.sampled_from(list("灯塔台阶钥匙海风林远。，！abc xyz.\n")),
                min_size=4, max_size=80)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunks=st.lists(st.tuples(piece, st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.integers(1, 30)),
                    min_size=8, max_size=90),
    history=st.lists(st.tuples(piece, st.floats(0, 1)), max_size=10),
    rules=st.lists(piece, max_size=5),
    before=st.text(alphabet=st.sampled_from(list("灯塔台阶钥匙海风。 ")), max_size=800),
    size=st.integers(200, 2500),
    minimum=st.integers(0, 400),
    spans=st.booleans(),
)
def test_setting_candidates_apart_never_changes_an_answer(
        chunks: list[tuple[str, float, int]], history: list[tuple[str, float]], rules: list[str],
        before: str, size: int, minimum: int, spans: bool) -> None:
    """Any passages (tied keys, repeated texts, spans over the window), past interactions and rules,
    at any budget and Retrieved minimum: the assembly that sets candidates apart answers exactly what
    the one that orders them all (explained) answers."""
    items = (*(item(f"constraint:{n}", "constraints", t, key=n) for n, t in enumerate(rules)),
             *(item(f"chunk:d#{n}", "passages", t * times, key=k,
                    span=(0, 5) if spans and n % 7 == 0 else None) for n, (t, k, times) in enumerate(chunks)),
             *(item(f"episode:{n}", "history", t, key=k) for n, (t, k) in enumerate(history)))
    profile = BudgetProfile(context_window=size, output_reserve=0, minimums=(0, 0, minimum, 0))
    request = Request(project_id=PROJECT, language="zh", plan=novel_plan(profile), profile=profile,
                      system_prompt_tokens=20, items=items, window=window(before), explain=False)
    assert _same_as_explained(request)
