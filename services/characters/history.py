"""A conversation's messages as prompt items, and the prompt's messages with each turn in its role.

History is budgeted by tokens, not by count (seed 003, section 2.3): every message is an item of the
``chat.history`` source keyed by its position, so the profile's ``drop_lowest`` step drops the
oldest first, and only when the budget needs it. A message marked important, a keyframe, or one a
memory names as its source is keyed above all small talk, so it outlives messages of its age; the
newest message, the one the model answers, is keyed above them all.
The caller bounds the candidates first: newest first, a few times the prompt's budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from services.characters.display import display
from services.concurrency.offload import off_loop
from services.context.models import Assembly, Item, Message
from services.sources.base import GatherContext

SOURCE = "chat.history"
ITEM_PREFIX = "message:"
PROTECTED = 1_000_000.0  # added to the key of a message that outlives small talk
MAX_PROTECTED = 64  # older protected messages kept as candidates beyond the bound


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored message, ready for the prompt."""

    id: int
    seq: int
    role: str  # user | assistant | system
    text: str  # what the prompt shows: "Speaker: content", or a keyframe block as it is
    content: str  # what the role's message holds
    protected: bool

    @property
    def item_id(self) -> str:
        return f"{ITEM_PREFIX}{self.id}"


def model_text(content: str) -> str:
    """What the model is sent of a stored message: without its old thoughts (they were private and
    cost tokens), unless the message also holds blocks written for the model."""
    shown = display(content)
    if shown.has_thoughts and not (shown.has_reminder or shown.has_keyframe):
        return shown.content
    return content


def entry(message_id: int, seq: int, role: str, kind: str, content: str, speaker: str,
          protected: bool) -> Entry:
    body = model_text(content)
    if kind == "keyframe":
        return Entry(message_id, seq, "system", body, body, True)
    return Entry(message_id, seq, role, f"{speaker}: {body}" if speaker else body, body, protected)


def bounded(entries: Sequence[Entry], limit: int, count: Callable[[str], int]) -> list[Entry]:
    """The newest entries until their tokens pass ``limit``, plus up to :data:`MAX_PROTECTED`
    older protected ones; in conversation order."""
    kept: list[Entry] = []
    older: list[Entry] = []
    total = 0
    for e in reversed(entries):
        if total <= limit:
            kept.append(e)
            total += count(e.text)
        elif e.protected and len(older) < MAX_PROTECTED:
            older.append(e)
    return sorted(kept + older, key=lambda e: e.seq)


@dataclass(frozen=True)
class HistoryProvider:
    """The ``chat.history`` items of one assembly."""

    entries: tuple[Entry, ...]
    name: str = "history"
    warning: str = "HISTORY_UNAVAILABLE"
    sources: tuple[str, ...] = (SOURCE,)

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        where = ctx.place(SOURCE)
        if where is None:
            return []
        return await off_loop(sum(len(e.text) for e in self.entries), _items, self.entries, ctx, where)


def _items(entries: Sequence[Entry], ctx: GatherContext, where: tuple[str, str]) -> list[Item]:
    section, part = where
    # The newest message (the one the model answers) outlives protected ones too: keyed as protected,
    # its seq puts it above them, and a ``drop_lowest`` that keeps one item keeps it.
    newest = max((e.seq for e in entries), default=None)
    return [Item(e.item_id, section, part, "chat", e.text, ctx.counter.count(e.text),
                 e.seq + (PROTECTED if e.protected or e.seq == newest else 0.0), "order", ctx.project_id)
            for e in entries]


def turn_messages(assembly: Assembly, system_prompt: str, entries: Mapping[str, Entry]) -> list[Message]:
    """The prompt split by role as :meth:`Assembly.messages` does, except that the history section
    gives one message per kept turn in its own role (a keyframe joins the system message, where
    every chat API accepts it); consecutive messages of one role are merged."""
    kept: dict[str, list[Entry]] = {}
    for report in assembly.reports:
        found = entries.get(report.id)
        if found is not None and report.fate != "dropped":
            kept.setdefault(report.layer, []).append(found)
    system = [system_prompt] if system_prompt else []
    runs: list[Message] = []

    def add(role: str, text: str) -> None:
        if role == "system":
            system.append(text)
        elif runs and runs[-1].role == role:
            runs[-1] = Message(role, runs[-1].content + "\n\n" + text)
        else:
            runs.append(Message(role, text))

    for section, layer in assembly.layers.items():
        if not layer.text:
            continue
        turns = kept.get(section)
        if turns is None:
            add(layer.role, layer.text)
            continue
        for e in turns:
            add(e.role, e.content)
    return ([Message("system", "\n\n".join(system))] if system else []) + runs
