"""Memory in the prompt (seed 003, §4.2, §4.5, §4.6): which memories to recall, and what fits.

:func:`recall` follows the query hierarchy: a continuing conversation recalls the pair's
memories and its own (by similarity to the latest text); a new conversation of a known pair
recalls the pair's; a new pairing recalls only what is known about each character's personality
and preferences. The newest keyframe of another conversation is the last session.

:func:`select` is pure: it shares the token budget out (relationship 40 %, facts 30 %, last
session 30 % by default), fills each share by importance then recency, hands what a share left
to the memories still waiting, cuts the last session to what remains, and checks the rendered
block's exact count against the budget, dropping the last choice while over.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from services.characters.memories import QUERY_CHARS, MemoryQuery, TypedMemory, TypedMemoryStore, pair_key
from services.projects.records import Language

Count = Callable[[str], int]
Format = Literal["plain", "mcp"]
Category = Literal["relationship", "facts"]
CATEGORIES: tuple[Category, ...] = ("relationship", "facts")
MEMORY_SCHEMA = "urn:am7:narrative:memory"

_TITLE = {"en": "Memories of {system} and {user}:", "zh": "{system}与{user}的记忆："}
_HEADERS: dict[str, dict[Category, str]] = {"en": {"relationship": "Relationship:", "facts": "Facts:"},
                                            "zh": {"relationship": "关系：", "facts": "事实："}}
_LAST = {"en": "Last time: {text}", "zh": "上次：{text}"}
_SENTENCE_END = re.compile(r"[.!?。！？…]+[\"'”’」』)）]*")
_CLAUSE_END = re.compile(r"[,;:，；：、]")
_WORD = re.compile(r"[A-Za-z0-9_'’-]")


@dataclass(frozen=True, slots=True)
class RecallSettings:
    budget: int = 500  # tokens of the whole memory block (chatConfig.memoryBudget)
    split: tuple[float, float, float] = (0.4, 0.3, 0.3)  # relationship, facts, last session
    format: Format = "plain"
    limit: int = 50  # memories considered
    min_similarity: float = 0.2

    def __post_init__(self) -> None:
        if self.budget < 0 or any(share < 0 for share in self.split) or sum(self.split) > 1 + 1e-9:
            raise ValueError("the budget must not be negative, nor the shares, which sum to at most 1")


@dataclass(frozen=True, slots=True)
class Recollection:
    context: str  # the rendered block; "" when nothing was recalled
    relationship: str  # the chosen relationship lines, "- summary" each
    facts: str
    last_session: str
    count: int  # memories chosen (the last session not counted)
    ids: tuple[int, ...] = ()  # the chosen memories, in the order rendered

    def variables(self) -> dict[str, str]:
        """The template variables (seed 003, §4.2)."""
        return {"memory.context": self.context, "memory.relationship": self.relationship,
                "memory.facts": self.facts, "memory.lastSession": self.last_session,
                "memory.count": str(self.count), "hasMemories": "true" if self.context else ""}


EMPTY = Recollection("", "", "", "", 0)


def one_line(text: str) -> str:
    """Runs of whitespace as one space: a memory stays one line of its list."""
    return " ".join(text.split())


def category_of(memory: TypedMemory) -> Category:
    return "relationship" if memory.memory_type == "RELATIONSHIP" else "facts"


def memory_order(memory: TypedMemory) -> tuple[int, float, int]:
    """Most important first, then the newest."""
    return -memory.importance, -memory.created_at.timestamp(), -memory.id


@dataclass(frozen=True, slots=True)
class Layout:
    """How the block is written: plain localized lines, or the seed's MCP context resource."""

    format: Format
    language: Language
    system_id: int
    user_id: int
    system_name: str
    user_name: str

    def frame(self) -> str:
        """What every non-empty block has, whatever was chosen."""
        if self.format == "mcp":
            return self._mcp({})
        return _TITLE[self.language].format(system=one_line(self.system_name), user=one_line(self.user_name))

    def header(self, category: Category) -> str:
        if self.format == "mcp":
            return f'"{category}":[]'
        return _HEADERS[self.language][category]

    def item(self, memory: TypedMemory) -> str:
        if self.format == "mcp":
            return _json(self._entry(memory))
        return "- " + one_line(memory.summary)

    def session(self, text: str) -> str:
        if self.format == "mcp":
            return '"lastSession":' + _json(text)
        return _LAST[self.language].format(text=text)

    def render(self, chosen: dict[Category, list[TypedMemory]], last: str) -> str:
        if not (last or any(chosen.values())):
            return ""
        if self.format == "mcp":
            data: dict[str, object] = {c: [self._entry(m) for m in chosen[c]]
                                       for c in CATEGORIES if chosen[c]}
            if last:
                data["lastSession"] = last
            return self._mcp(data)
        lines = [self.frame()]
        for category in CATEGORIES:
            if chosen[category]:
                lines += [self.header(category), *(self.item(m) for m in chosen[category])]
        if last:
            lines.append(self.session(last))
        return "\n".join(lines)

    @staticmethod
    def _entry(memory: TypedMemory) -> dict[str, object]:
        entry: dict[str, object] = {"summary": memory.summary, "importance": memory.importance}
        if memory.memory_type == "RELATIONSHIP":
            entry["session"] = memory.created_at.date().isoformat()
        return entry

    def _mcp(self, data: dict[str, object]) -> str:
        uri = f"am7://memory/{self.system_id}/{self.user_id}"
        return (f'<mcp:context type="resource" uri="{uri}" ephemeral="true">\n'
                f"{_json({'schema': MEMORY_SCHEMA, 'data': data})}\n</mcp:context>")


def _json(value: object) -> str:
    # "<" escaped: a memory that says "</mcp:context>" cannot close the block early.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def cut(text: str, fits: Callable[[str], bool]) -> str:
    """The longest start of ``text`` that ``fits``, ended at a sentence end (else a clause end) if
    one is in its second half, else not inside a word; "" if nothing fits."""
    if fits(text):
        return text
    low, high = 0, len(text) - 1  # the longest prefix that fits: counts grow with the prefix
    while low < high:
        middle = (low + high + 1) // 2
        if fits(text[:middle]):
            low = middle
        else:
            high = middle - 1
    for pattern in (_SENTENCE_END, _CLAUSE_END):
        ends = [m.end() for m in pattern.finditer(text, 0, low) if m.end() >= low / 2]
        if ends:
            low = ends[-1]
            break
    else:
        if 0 < low < len(text) and _WORD.match(text[low - 1]) and _WORD.match(text[low]):
            spaces = [i for i in range(low - 1, 0, -1) if text[i].isspace()]
            low = spaces[0] if spaces else 0  # one word longer than the room: nothing, not half of it
    result = text[:low].rstrip()
    return result if result and fits(result) else ""


@dataclass
class _Selection:
    layout: Layout
    count: Count
    chosen: dict[Category, list[TypedMemory]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})
    picks: list[TypedMemory] = field(default_factory=list)  # in the order chosen
    taken: set[int] = field(default_factory=set)

    def cost(self, memory: TypedMemory) -> int:
        """Tokens the memory adds: its line, a separator, and its category's header if first."""
        category = category_of(memory)
        cost = self.count(self.layout.item(memory)) + 1
        if not self.chosen[category]:
            cost += self.count(self.layout.header(category)) + 1
        return cost

    def take(self, memory: TypedMemory) -> None:
        self.chosen[category_of(memory)].append(memory)
        self.picks.append(memory)
        self.taken.add(memory.id)

    def drop_last(self) -> None:
        memory = self.picks.pop()
        self.taken.discard(memory.id)
        self.chosen[category_of(memory)].remove(memory)


def select(memories: Sequence[TypedMemory], last_session: str, *, layout: Layout, budget: int,
           split: tuple[float, float, float] = (0.4, 0.3, 0.3), count: Count) -> Recollection:
    """The memories and last-session text that fit ``budget`` tokens (exactly, by ``count``)."""
    ordered = sorted(memories, key=memory_order)
    available = budget - count(layout.frame()) - 1
    if available <= 0:
        return EMPTY
    shares = {c: math.floor(available * share) for c, share in zip(CATEGORIES, split, strict=False)}
    session_share = math.floor(available * split[2])
    selection = _Selection(layout, count)
    used = dict.fromkeys(CATEGORIES, 0)
    for memory in ordered:  # each category within its share
        category, cost = category_of(memory), selection.cost(memory)
        if used[category] + cost <= shares[category]:
            selection.take(memory)
            used[category] += cost
    last = one_line(last_session)
    session_cost = count(layout.session(last)) + 1 if last else 0
    claimed = min(session_cost, session_share)
    room = available - sum(used.values()) - claimed
    for memory in ordered:  # what the shares left, to the memories still waiting, in the same order
        if memory.id not in selection.taken and (cost := selection.cost(memory)) <= room:
            selection.take(memory)
            room -= cost
    if last and session_cost > claimed + room:
        last = cut(last, lambda text: count(layout.session(text)) + 1 <= claimed + room)
    while True:  # counts are not quite additive: check the block itself, drop the last choice while over
        over = count(layout.render(selection.chosen, last)) - budget
        if over <= 0:
            break
        if last:
            last = _shorter(last, count(layout.session(last)) - over, layout, count)
        else:
            selection.drop_last()
    for memories_of in selection.chosen.values():
        memories_of.sort(key=memory_order)
    chosen = selection.chosen
    return Recollection(
        context=layout.render(chosen, last),
        relationship="\n".join("- " + one_line(m.summary) for m in chosen["relationship"]),
        facts="\n".join("- " + one_line(m.summary) for m in chosen["facts"]),
        last_session=last, count=len(selection.picks),
        ids=tuple(m.id for c in CATEGORIES for m in chosen[c]))


def _shorter(last: str, target: int, layout: Layout, count: Count) -> str:
    """``last`` cut so that its line counts at most ``target`` tokens."""
    return cut(last, lambda text: count(layout.session(text)) <= target)


async def recall(store: TypedMemoryStore, project_id: str, *, system_id: int, user_id: int,
                 system_name: str, user_name: str, conversation_id: str | None, continuing: bool,
                 text: str | None, language: Language, count: Count,
                 settings: RecallSettings | None = None) -> Recollection:
    """The memory block for a prompt of the pair's conversation (see the module docstring)."""
    settings = settings or RecallSettings()
    pair = pair_key(system_id, user_id)
    if continuing and conversation_id is not None:
        latest = text[-QUERY_CHARS:] if text else None  # the encoder sees a bounded text: the latest words
        found = await store.search(project_id, MemoryQuery(
            system_id, user_id, conversation_id, None, latest, settings.limit, settings.min_similarity))
    else:
        query = MemoryQuery(system_id, user_id, limit=settings.limit)
        found = await store.search_or_personal(project_id, query)
    memories = [recalled.memory for recalled in found]
    keyframe = await store.last_keyframe(project_id, pair, conversation_id)
    last = ""
    if keyframe is not None:
        last = keyframe.content or keyframe.summary  # the whole keyframe, cut to its share
        memories = [m for m in memories if m.id != keyframe.id]  # said once, as the last session
    layout = Layout(settings.format, language, system_id, user_id, system_name, user_name)
    # Counting is CPU work: off the event loop.
    return await asyncio.to_thread(select, memories, last, layout=layout, budget=settings.budget,
                                   split=settings.split, count=count)
