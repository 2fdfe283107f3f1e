"""The intent call's prompt on the chat-navigation profile: the seed's preamble, exactly, within budget."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.chat.prompt import PROFILE, Budgets, build, kept_context, kept_recent
from services.chat.sessions import ChatContext
from services.context.plan import Plan
from services.errors import InputTooLarge
from services.profiles.plans import BuiltInPlans
from tests.services.context.factory import counter


@functools.cache
def plan() -> Plan:
    return BuiltInPlans().resolved[PROFILE].plan


ROOMY = Budgets(token_budget=4096, context_budget=1024)


def test_the_user_message_is_the_seeds_preamble() -> None:
    """Summary, numbered recent messages, the last question, a blank line, the current message."""
    context = ChatContext("User asked for chapter 5.", ("open chapter 4", "chapter 5"),
                          "Do you want to open chapter 5?", "chapter 6")
    assembly = build(plan(), context, ROOMY, counter(), "en")
    user = [m.content for m in assembly.messages("") if m.role == "user"]
    assert user == [
        "Context:\n"
        "- Summary: User asked for chapter 5.\n"
        "- Recent user messages:\n"
        "  1) open chapter 4\n"
        "  2) chapter 5\n"
        "- Last assistant question: Do you want to open chapter 5?\n"
        "\n"
        "Current user message: chapter 6"
    ]
    assert assembly.prompt.endswith(user[0])


def test_the_instructions_are_the_stable_system_message() -> None:
    """The intent instructions and examples are the system message and the cacheable prefix."""
    assembly = build(plan(), ChatContext(None, (), None, "打开第五章"), ROOMY, counter(), "zh")
    system = [m.content for m in assembly.messages("") if m.role == "system"]
    assert len(system) == 1
    assert '"intent":"open_document"' in system[0]
    assert "unsupported" in system[0]
    assert assembly.stable_prefix == system[0]
    other = build(plan(), ChatContext("x", ("y",), "z?", "w"), ROOMY, counter(), "en")
    assert other.stable_prefix_hash == assembly.stable_prefix_hash


def test_without_summary_recent_or_question_the_lines_stay_minimal() -> None:
    """No summary: an empty Summary line; no recent messages: no list header; no question: no line."""
    assembly = build(plan(), ChatContext(None, (), None, "chapter 5"), ROOMY, counter(), "en")
    assert assembly.prompt.endswith("Context:\n- Summary:\n\nCurrent user message: chapter 5")


def test_values_stay_literal() -> None:
    """A placeholder inside a message or summary is never expanded."""
    context = ChatContext("${message}", ("${summary}",), None, "${tokenBudget}")
    prompt = build(plan(), context, ROOMY, counter(), "en").prompt
    assert "- Summary: ${message}" in prompt
    assert "  1) ${summary}" in prompt
    assert prompt.endswith("Current user message: ${tokenBudget}")


def test_a_tight_context_budget_drops_the_oldest_user_messages_first() -> None:
    """Over the context budget, the oldest recent messages go; the newest stay in order."""
    recent = tuple(f"open chapter {n} of the lighthouse keeper's long story" for n in range(1, 9))
    context = ChatContext("User asked for chapters in order.", recent, None, "chapter 9")
    assembly = build(plan(), context, Budgets(4096, 80), counter(), "en")
    kept = kept_recent(assembly, context)
    assert 0 < len(kept) < 8
    assert kept == recent[-len(kept):]
    assert assembly.layers["context"].tokens <= 80
    assert [r.step for r in assembly.reductions] == ["cap_recent"]


def test_a_tight_token_budget_drops_the_oldest_first_and_counts_exactly() -> None:
    """Over the whole budget, oldest first too; tokenCount is the exact count and within it."""
    recent = tuple(f"message number {n} about the storm chapter" for n in range(1, 9))
    context = ChatContext(None, recent, None, "the next one")
    full = build(plan(), context, ROOMY, counter(), "en")
    budget = full.token_count - 20
    assembly = build(plan(), context, Budgets(budget, 1024), counter(), "en")
    kept = kept_recent(assembly, context)
    assert kept == recent[-len(kept):]
    assert len(kept) < 8
    assert assembly.token_count == counter().count(assembly.prompt) <= budget


def test_a_budget_that_cannot_hold_instructions_and_message_is_refused() -> None:
    """The instructions and the current message are never cut: a smaller budget is refused."""
    with pytest.raises(InputTooLarge) as caught:
        build(plan(), ChatContext(None, (), None, "chapter 5"), Budgets(100, 1024), counter(), "en")
    assert caught.value.fields["fixedTokens"] > 100


def fixed_tokens(current: str) -> int:
    """The instructions and the current message alone: a context budget of one token drops the block."""
    return build(plan(), ChatContext(None, (), None, current), Budgets(4096, 1), counter(), "en").token_count


def test_a_block_over_the_context_budget_without_messages_goes_whole() -> None:
    """A summary and question over ``contextBudget`` once every recent message is gone: the block
    goes whole (reason context_budget), and the structured context says nothing of it."""
    summary = "The user went through the lighthouse chapters one by one, then asked for the storm."
    context = ChatContext(summary, ("open chapter 4",), "Do you want the storm chapter?", "chapter 16")
    assembly = build(plan(), context, Budgets(4096, 10), counter(), "en")
    assert assembly.layers["context"].text == ""
    assert [r.step for r in assembly.reductions] == ["cap_recent", "cap_block"]
    assert assembly.prompt.endswith("\n\nCurrent user message: chapter 16")
    assert "Summary" not in assembly.prompt
    assert kept_context(assembly, plan(), context) == ChatContext(None, (), None, "chapter 16")


def test_a_token_budget_between_the_fixed_parts_and_the_block_drops_the_block() -> None:
    """A ``tokenBudget`` that holds the instructions and the current message but not the block is
    met by dropping the block whole, not refused."""
    context = ChatContext(None, ("open chapter 1",), "Do you want the lighthouse book or the storm book?",
                          "chapter 2")
    fixed = fixed_tokens("chapter 2")
    for budget in (fixed, fixed + 2):
        assembly = build(plan(), context, Budgets(budget, 1024), counter(), "en")
        assert assembly.token_count == counter().count(assembly.prompt) <= budget
        assert [r.step for r in assembly.reductions] == ["drop_recent", "drop_block"]
        assert kept_context(assembly, plan(), context) == ChatContext(None, (), None, "chapter 2")


def test_a_kept_block_keeps_its_summary_and_question() -> None:
    """While the block is in the prompt, the structured context holds its summary and question."""
    context = ChatContext("User asked for chapter 5.", ("open chapter 4",), "Chapter 5?", "yes")
    assembly = build(plan(), context, ROOMY, counter(), "en")
    assert kept_context(assembly, plan(), context) == context


@settings(max_examples=40, deadline=None)
@given(recent=st.lists(st.text(min_size=1, max_size=80).filter(str.strip), max_size=8),
       summary=st.none() | st.text(min_size=1, max_size=300).filter(str.strip),
       question=st.none() | st.text(min_size=1, max_size=120).filter(str.strip),
       context_budget=st.integers(min_value=1, max_value=400),
       slack=st.integers(min_value=0, max_value=300))
def test_token_count_is_exact_and_within_budget(recent: list[str], summary: str | None, question: str | None,
                                                context_budget: int, slack: int) -> None:
    """For any messages and any budget that holds the instructions and the current message,
    tokenCount equals the tokenizer's count of the prompt and never exceeds the budget, the block
    never exceeds the context budget, and the kept messages are the newest ones."""
    context = ChatContext(summary, tuple(recent), question, "chapter 5")
    budget = fixed_tokens("chapter 5") + slack
    assembly = build(plan(), context, Budgets(budget, context_budget), counter(), "en")
    assert assembly.token_count == counter().count(assembly.prompt) <= budget
    assert assembly.layers["context"].tokens <= context_budget
    kept = kept_recent(assembly, context)
    assert kept == tuple(recent[len(recent) - len(kept):])
