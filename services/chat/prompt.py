"""The intent call's prompt: the seed's context block, assembled by the engine on the chat-navigation plan.

Pure: a session's :class:`~services.chat.sessions.ChatContext` and the plan in,
an :class:`~services.context.models.Assembly` out. The summary, the last
assistant question and the current message are the plan's variables (expanded
into its own lines, literally); each recent user message is an item of the
``chat.recent`` source, keyed by its position so that the budget's
``drop_lowest`` steps take the oldest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from services.chat.sessions import ChatContext
from services.context.counting import CountCache
from services.context.engine import Request, assemble
from services.context.models import Assembly, BudgetProfile, Item
from services.context.plan import Plan

PROFILE = "chat-navigation"
RECENT_SOURCE = "chat.recent"
ITEM_PREFIX = "message:"
# The engine checks every item against the request's project; chat items belong to the session.
NO_PROJECT = ""


@dataclass(frozen=True, slots=True)
class Budgets:
    """Tokens the whole prompt may take, and the context block (summary, recent, question)."""

    token_budget: int
    context_budget: int

    def variables(self) -> dict[str, str]:
        return {"tokenBudget": str(self.token_budget), "contextBudget": str(self.context_budget)}


def variables(context: ChatContext, budgets: Budgets) -> dict[str, str]:
    return {
        "message": context.current,
        "summary": context.summary or "",
        "lastAssistantQuestion": context.last_assistant_question or "",
        **budgets.variables(),
    }


def facts(values: Mapping[str, str], recent: int) -> frozenset[str]:
    """``always``, each variable with a value, and ``hasRecentMessages`` when there are any."""
    found = {"always", *(name for name, value in values.items() if value.strip())}
    if recent:
        found.add("hasRecentMessages")
    return frozenset(found)


def recent_items(plan: Plan, context: ChatContext, counter: CountCache, project_id: str) -> tuple[Item, ...]:
    where = plan.placed.get(RECENT_SOURCE)
    if where is None:
        return ()
    section, part = where
    return tuple(
        Item(id=f"{ITEM_PREFIX}{n}", layer=section, section=part, source="chat", text=text,
             tokens=counter.count(text), key=float(n), key_name="order", project_id=project_id)
        for n, text in enumerate(context.recent_user_messages, start=1)
    )


def kept_recent(assembly: Assembly, context: ChatContext) -> tuple[str, ...]:
    """The recent user messages that made the prompt, oldest first."""
    kept = {r.id for r in assembly.reports if r.fate != "dropped" and r.id.startswith(ITEM_PREFIX)}
    return tuple(text for n, text in enumerate(context.recent_user_messages, start=1)
                 if f"{ITEM_PREFIX}{n}" in kept)


def kept_context(assembly: Assembly, plan: Plan, context: ChatContext) -> ChatContext:
    """What of ``context`` made the prompt: no summary, message or question once the block that
    holds the recent messages went whole (over ``contextBudget``, or with it the whole prompt)."""
    where = plan.placed.get(RECENT_SOURCE)
    block = assembly.layers.get(where[0]) if where is not None else None
    if block is not None and not block.text:
        return ChatContext(None, (), None, context.current)
    return ChatContext(context.summary, kept_recent(assembly, context), context.last_assistant_question,
                       context.current)


def build(plan: Plan, context: ChatContext, budgets: Budgets, counter: CountCache, language: str,
          project_id: str = NO_PROJECT) -> Assembly:
    """The prompt for the intent call, within ``budgets`` (CPU work: run it off the event loop
    when the texts are large)."""
    bound = plan.bind(budgets.variables())
    values = variables(context, budgets)
    items = recent_items(bound, context, counter, project_id)
    window = int(bound.context_window) if isinstance(bound.context_window, int) else budgets.token_budget
    profile = BudgetProfile(context_window=window, output_reserve=int(bound.output_reserve))
    # Each text on its own, so the summary and the question are counted once across turns.
    message_tokens = sum(counter.count(text) for text in (context.current, context.summary or "",
                                                          context.last_assistant_question or ""))
    request = Request(project_id=project_id, language=language, plan=bound, profile=profile,
                      system_prompt_tokens=0, items=items, window=None, variables=values,
                      facts=facts({**bound.variables, **values}, len(items)),
                      variable_tokens=message_tokens)
    return assemble(request, counter)
