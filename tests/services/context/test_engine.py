"""The assembly pipeline: budget semantics, exact counts, determinism."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.context.budget import MAX_INPUT_TOKENS
from services.context.engine import Request, assemble, fresh_chars
from services.context.hashing import sha256_hex
from services.context.memo import BoundedMemo
from services.context.models import Assembly, BudgetProfile, Item
from services.errors import InputTooLarge, ScopeViolation
from tests.services.context.factory import PROJECT, counter, item, novel_plan, novel_request, window

CHAPTER = "我推开灯塔的门，海风灌进来。台阶一级一级向上。" * 40


def _request(items: tuple[object, ...] = (), *, before: str = CHAPTER, after: str = "",
             profile: BudgetProfile | None = None, instruction: str | None = None,
             system_prompt_tokens: int = 40) -> Request:
    return novel_request(items, profile=profile or BudgetProfile(),  # type: ignore[arg-type]
                         system_prompt_tokens=system_prompt_tokens, window_=window(before, after),
                         instruction=instruction)


def _fates(result: object) -> dict[str, tuple[str, str | None]]:
    return {r.id: (r.fate, r.reason) for r in result.reports}  # type: ignore[attr-defined]


def test_everything_fits_nothing_trimmed() -> None:
    """Within budget every item is included and no layer reports truncation."""
    items = (item("c1", "constraints", "严格第一人称叙述", 10),
             item("s1", "preferences", "动作场景偏好短句", 0.9),
             item("r1", "passages", "钥匙藏在第三级台阶下。", 0.8))
    result = assemble(_request(items), counter())
    assert all(fate == "included" for fate, _ in _fates(result).values())
    assert not any(layer.truncated for layer in result.layers.values())
    assert result.token_count == counter().count(result.prompt) <= result.budget.total


def test_retrieved_is_trimmed_first_lowest_score_first() -> None:
    """Over budget, the lowest-scoring retrieved chunk goes first; other layers stay whole."""
    chunk = "灯塔的第三级台阶下藏着一把生锈的钥匙，" * 12
    items = tuple(item(f"r{n}", "passages", f"{n}:{chunk}", key=n / 10) for n in range(1, 6))
    profile = BudgetProfile(context_window=2200, output_reserve=200)
    result = assemble(_request(items, before=CHAPTER[:600], profile=profile), counter())
    fates = _fates(result)
    dropped = sorted(k for k, (fate, _) in fates.items() if fate == "dropped")
    assert dropped
    assert dropped == [f"r{n}" for n in range(1, len(dropped) + 1)]
    assert all(fates[k] == ("dropped", "budget") for k in dropped)
    assert result.layers["retrieved"].truncated
    assert not result.layers["immediate"].truncated
    assert result.token_count <= result.budget.total


def test_minimum_is_a_guarantee_before_going_lower() -> None:
    """Settings keeps its minimum while Immediate still has room to give."""
    items = tuple(item(f"s{n}", "preferences", f"偏好{n}：动作场景偏好短句，对话少用副词。", key=n / 10)
                  for n in range(1, 9))
    profile = BudgetProfile(context_window=1250, output_reserve=100, minimums=(100, 150, 0, 300))
    result = assemble(_request(items, profile=profile), counter())
    settings_layer = result.layers["settings"]
    assert settings_layer.tokens >= 150
    assert result.layers["immediate"].truncated
    assert result.layers["immediate"].tokens >= 300
    assert result.token_count <= result.budget.total
    assert result.token_count <= result.budget.total


def test_immediate_keeps_text_nearest_the_cursor_on_a_sentence_boundary() -> None:
    """The window is cut from the far end and starts at a sentence."""
    before = "".join(f"第{n}句话在这里结束。" for n in range(400))
    profile = BudgetProfile(context_window=1200, output_reserve=100, minimums=(0, 0, 0, 200))
    result = assemble(_request((), before=before, profile=profile), counter())
    text = result.layers["immediate"].text
    body = text.split("\n", 1)[1]
    assert before.endswith(body)
    assert body.startswith("第")
    assert "第399句话在这里结束。" in body


def test_scope_violation_refuses_the_request() -> None:
    """An item from another project fails the assembly instead of being injected."""
    items = (item("r1", "passages", "别的项目的段落", project_id="project-b"),)
    with pytest.raises(ScopeViolation):
        assemble(_request(items), counter())


def test_malformed_items_are_skipped_with_a_warning() -> None:
    """A negative token count is skipped with CONTEXT_LAYER_INVALID; assembly continues."""
    items = (item("bad", "passages", "坏数据", tokens=-5), item("ok", "passages", "好数据"))
    result = assemble(_request(items), counter())
    assert _fates(result)["bad"] == ("dropped", "invalid")
    assert any(w.startswith("CONTEXT_LAYER_INVALID") for w in result.warnings)
    assert _fates(result)["ok"][0] == "included"


def test_duplicates_are_skipped() -> None:
    """A retrieved chunk already in the window, or repeating another, is a duplicate."""
    items = (item("r1", "passages", "台阶一级一级向上。"),
             item("r2", "passages", "她把钥匙放回口袋。"),
             item("r3", "history", "她把钥匙放回口袋。"))
    fates = _fates(assemble(_request(items), counter()))
    assert fates["r1"] == ("dropped", "duplicate")
    assert fates["r2"] == ("included", None)
    assert fates["r3"] == ("dropped", "duplicate")


def test_input_above_64k_tokens_is_refused() -> None:
    """Gathered input above 64k tokens answers CONTEXT_INPUT_TOO_LARGE (passages from the index are
    bounded apart; see the next test)."""
    items = (item("h1", "history", "x", tokens=70_000),)
    with pytest.raises(InputTooLarge):
        assemble(_request(items), counter())


def test_stable_prefix_is_rules_and_settings() -> None:
    """The stable prefix is a true prefix of the prompt and its hash is SHA-256 of its bytes."""
    items = (item("c1", "constraints", "本世界没有魔法"), item("s1", "preferences", "偏好短句"),
             item("r1", "passages", "前文"))
    result = assemble(_request(items), counter())
    assert result.prompt.startswith(result.stable_prefix)
    assert result.stable_prefix.endswith("- 偏好短句")
    assert result.stable_prefix_hash == sha256_hex(result.stable_prefix)
    assert result.prefix_hashes["settings"] == result.stable_prefix_hash
    assert result.prefix_hashes["immediate"] == sha256_hex(result.prompt)


text_piece = st.text(alphabet=st.sampled_from(list("灯塔台阶钥匙海风林远。，！？abc xyz.!?\n")),
                     min_size=1, max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rules=st.lists(text_piece, max_size=6),
    prefs=st.lists(st.tuples(text_piece, st.floats(0, 1)), max_size=6),
    chunks=st.lists(st.tuples(text_piece, st.floats(0, 1)), max_size=12),
    before=st.text(alphabet=st.sampled_from(list("我推开门。海风很冷！Hello world. ")), max_size=3000),
    after=st.text(alphabet=st.sampled_from(list("后文。abc ")), max_size=300),
    window_size=st.integers(300, 6000),
    reserve=st.integers(0, 200),
    minimums=st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(0, 50), st.integers(0, 300)),
    language=st.sampled_from(["zh", "en"]),
)
def test_token_count_is_exact_and_within_budget(
        rules: list[str], prefs: list[tuple[str, float]], chunks: list[tuple[str, float]], before: str,
        after: str, window_size: int, reserve: int, minimums: tuple[int, int, int, int],
        language: str) -> None:
    """tokenCount equals the tokenizer's count of the prompt and never exceeds the budget; the same
    request gives the same prompt again, and without explaining its candidates (context:assemble)
    everything but the reports is the same."""
    items = (*(item(f"c{n}", "constraints", t, key=n) for n, t in enumerate(rules)),
             *(item(f"s{n}", "preferences", t, key=k) for n, (t, k) in enumerate(prefs)),
             *(item(f"r{n}", "passages", t, key=k) for n, (t, k) in enumerate(chunks)))
    profile = BudgetProfile(context_window=window_size, output_reserve=reserve, minimums=minimums)
    request = Request(project_id=PROJECT, language=language, plan=novel_plan(profile), profile=profile,
                      system_prompt_tokens=30, items=items, window=window(before, after),
                      instruction="continue", instruction_tokens=1)
    result = assemble(request, counter())
    assert result.token_count == counter().tokenizer.count(result.prompt)
    assert result.token_count <= result.budget.total
    assert result.prompt.startswith(result.stable_prefix)
    again = assemble(request, counter())
    assert (again.prompt, again.stable_prefix_hash) == (result.prompt, result.stable_prefix_hash)
    unexplained = assemble(replace(request, explain=False), counter())
    assert unexplained.reports == ()
    assert len(result.reports) >= len(items)  # each candidate has its fate when explained
    assert _outcome(unexplained) == _outcome(result)


def _outcome(result: Assembly) -> tuple[object, ...]:
    """Everything an assembly answers but its candidates' reports."""
    return (result.prompt, result.token_count, result.prefix_hashes, result.layers, result.warnings,
            result.reductions, result.stable_ends, result.part_texts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rules=st.lists(text_piece, max_size=8),
    entities=st.lists(st.tuples(text_piece, st.sampled_from(["林远", "灯塔", "海风", "x"])), max_size=6),
    chunks=st.lists(st.tuples(text_piece, st.floats(0, 1)), max_size=12),
    requests=st.lists(st.tuples(
        st.text(alphabet=st.sampled_from(list("我推开门。海风很冷！林远灯塔 ")), max_size=1500),
        st.integers(300, 3000), st.booleans()), min_size=2, max_size=5),
)
def test_a_projects_memo_kept_between_assemblies_changes_nothing(
        rules: list[str], entities: list[tuple[str, str]], chunks: list[tuple[str, float]],
        requests: list[tuple[str, int, bool]]) -> None:
    """The same item objects assembled at several windows and budgets in turn, with one project's
    memo kept between them (kept screenings, orderings and section counts), answer exactly what each
    assembly answers with no memo, reports included."""
    items = (*(item(f"constraint:{n}", "constraints", t, key=n % 3, origin="kg" if n % 2 else "user")
               for n, t in enumerate(rules)),
             *(item(f"entity:{n}", "entities", t, key=0.1 * n, origin="kg", names=(name,))
               for n, (t, name) in enumerate(entities)),
             *(item(f"chunk:d#{n}", "passages", t, key=k) for n, (t, k) in enumerate(chunks)))
    memo = BoundedMemo()
    for before, size, explain in requests:
        profile = BudgetProfile(context_window=size, output_reserve=0)
        request = Request(project_id=PROJECT, language="zh", plan=novel_plan(profile), profile=profile,
                          system_prompt_tokens=30, items=items, window=window(before), explain=explain)
        kept, fresh = assemble(request, counter(), memo), assemble(request, counter())
        assert (_outcome(kept), kept.reports) == (_outcome(fresh), fresh.reports)


def test_equal_priority_constraints_keep_creation_order() -> None:
    """Constraints of equal priority are numbered oldest first: 9 before 10, not as strings."""
    items = tuple(item(f"constraint:{n}", "constraints", f"约束{n}", key=1) for n in (10, 2, 9, 1))
    rules = assemble(_request(items), counter()).layers["rules"].text
    assert rules.split("\n")[1:] == ["1. 约束1", "2. 约束2", "3. 约束9", "4. 约束10"]


def test_narrative_and_constraints_order_without_type_errors() -> None:
    """Any keys in any Rules section order without comparing unlike values."""
    items = (item("settings:narrative", "narrative", "叙述人称：第一人称", key=0),
             item("constraint:1", "constraints", "约束", key=-1, origin="kg"),
             item("entity:3", "entities", "林远", key=0.5, names=("林远",)))
    assert assemble(_request(items), counter()).layers["rules"].tokens > 0


def test_retrieved_passages_do_not_count_towards_the_input_cap() -> None:
    """200 passages of the project's own text (bounded apart) never turn a request that is within
    MAX_INPUT_TOKENS into CONTEXT_INPUT_TOO_LARGE; the budget trims them like any candidate. Other
    gathered items still count."""
    passages = tuple(item(f"chunk:a.md#{n}", "passages", "灯塔", tokens=MAX_INPUT_TOKENS // 100)
                     for n in range(200))
    history = (item("episode:1", "history", "旧事", tokens=MAX_INPUT_TOKENS + 1),)

    def request(items: tuple[Item, ...]) -> Request:
        return Request(project_id=PROJECT, language="zh", plan=novel_plan(), profile=BudgetProfile(),
                       system_prompt_tokens=10, items=items, window=None)

    result = assemble(request(passages), counter())
    assert result.token_count <= result.budget.total
    with pytest.raises(InputTooLarge):
        assemble(request(passages + history), counter())


def test_fresh_chars_counts_what_the_assembly_reads_except_indexed_passages() -> None:
    """The measure that sends an assembly off the event loop counts the window, the instruction,
    the variables and every gathered item but the retrieved passages, which the index counted and
    caps: 200 long passages leave it where it was, a long constraint adds its length."""
    passages = tuple(item(f"r{n}", "passages", "钥匙藏在第三级台阶下。" * 60, 0.5) for n in range(200))
    small = (item("c1", "constraints", "严格第一人称叙述", 10),)
    base = _request(small, instruction="续写")
    expected = len(CHAPTER) + len("续写") + len("严格第一人称叙述")
    assert fresh_chars(base) == expected
    assert fresh_chars(replace(base, items=small + passages)) == expected
    long = item("c2", "constraints", "林远不会游泳。" * 1000, 5)
    assert fresh_chars(replace(base, items=(*small, long))) == expected + len(long.text)
    assert fresh_chars(replace(base, variables={"name": "林远"})) == expected + 2
