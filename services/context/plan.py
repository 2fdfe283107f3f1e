"""A resolved profile: what the engine runs.

:mod:`services.profiles` turns a profile document (with ``extends`` flattened
and every reference checked) into a :class:`Plan`. The engine reads nothing
else about sections: their ids, sources, formats, budgets and reduction
ladders all come from here, so a new assembly mode is a new plan, not new code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Literal

PartKind = Literal["items", "window", "text"]
ListStyle = Literal["plain", "numbered", "bulleted"]
Rank = Literal["key", "user_first", "mentioned_first", "given"]
Dedupe = Literal["id", "text", "window"]
StepName = Literal["drop_lowest", "cut_far_end", "trim_chars", "summary_cue", "lower_tier", "drop_section"]
Role = Literal["system", "user", "assistant"]

MAX_TOKENS = 10_000_000  # the most a number of tokens may be, wherever it comes from

# A condition: a fact's name, or ("not", c) / ("all", (c, ...)) / ("any", (c, ...)).
Condition = str | tuple[str, object]
# Text per language; "en" is the fallback.
Localized = Mapping[str, str]


def localize(text: Localized | None, language: str) -> str:
    if not text:
        return ""
    return text.get(language) or text.get("en") or next(iter(text.values()))


def holds(condition: Condition | None, facts: frozenset[str]) -> bool:
    """Whether ``condition`` is true of ``facts``; no condition always holds."""
    if condition is None:
        return True
    if isinstance(condition, str):
        return condition == "always" or condition in facts
    op, arg = condition
    if op == "not":
        return not holds(arg, facts)  # type: ignore[arg-type]
    parts = arg  # a tuple of conditions
    if op == "all":
        return all(holds(c, facts) for c in parts)  # type: ignore[attr-defined]
    return any(holds(c, facts) for c in parts)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Line:
    text: str  # may hold ${name} placeholders, expanded once; the English (or only) text
    condition: Condition | None = None
    local: Localized | None = None  # one text per language, when the profile gave several

    def for_language(self, language: str) -> str:
        return self.text if self.local is None else localize(self.local, language)


@dataclass(frozen=True, slots=True)
class PartPlan:
    id: str
    source: str
    kind: PartKind
    header: Localized | None = None
    begin: Localized | None = None
    end: Localized | None = None
    cursor: Localized | None = None  # marks the cursor in a document window
    group_header: Localized | None = None  # items by group, each under this line ({group}: its name)
    list_style: ListStyle = "plain"
    separator: str = "\n\n"
    marker: str | None = None  # before each item of a numbered ({n}: its number) or bulleted list
    content: tuple[Line, ...] = ()
    condition: Condition | None = None
    rank: Rank = "key"
    dedupe: Dedupe = "text"
    bounded: bool = False  # its items are bounded apart and not counted as the caller's input
    audit: bool = False  # items cut from it are logged by id


@dataclass(frozen=True, slots=True)
class StepPlan:
    section: str
    id: str
    step: StepName
    target: Literal["fit", "cap"] = "fit"
    floor: Literal["minimum", "none"] = "minimum"
    parts: tuple[str, ...] | None = None
    origin: str | None = None
    order: Literal["key", "reverse"] = "key"
    chars: int | None = None
    cue: Localized | None = None
    reason: str = "budget"
    # Per part, where one step drops from several parts each in its own order or for its own reason.
    part_orders: Mapping[str, Literal["key", "reverse"]] = field(default_factory=dict)
    part_reasons: Mapping[str, str] = field(default_factory=dict)
    warn: Literal["below_minimum", "overbudget"] | None = None
    groups: bool = False  # drop_lowest: whole groups at a time
    keep: int = 0  # drop_lowest: items (or groups) the step always leaves
    boundary: Literal["near", "sentence"] = "near"  # cut_far_end on text parts: where cuts may land

    @property
    def name(self) -> str:
        return f"{self.section}:{self.id}"


@dataclass(frozen=True, slots=True)
class SectionPlan:
    id: str
    parts: tuple[PartPlan, ...]
    role: Role = "user"
    stable: bool = False
    condition: Condition | None = None
    ratio: float = 0.0
    minimum: int = 0
    max: int | str | None = None  # tokens, or the name of the variable that gives them
    steps: tuple[StepPlan, ...] = ()
    never: bool = False
    candidates: int | None = None
    overbudget_warning: str | None = None
    truncated_warning: str | None = None
    separator: str = "\n\n"  # between its parts

    def part(self, part_id: str) -> PartPlan | None:
        return next((p for p in self.parts if p.id == part_id), None)

    @property
    def window_part(self) -> PartPlan | None:
        return next((p for p in self.parts if p.kind == "window"), None)


@dataclass(frozen=True)  # no slots: what is derived from the plan is kept on it (cached_property)
class Plan:
    name: str
    sections: tuple[SectionPlan, ...]
    trim: tuple[StepPlan, ...] = ()
    last_resort: tuple[str, ...] = ()
    variables: Mapping[str, str] = field(default_factory=dict)  # declared variables and their defaults
    facts: Mapping[str, str] = field(default_factory=dict)  # fact name -> the source that publishes it
    lineage: tuple[str, ...] = ()  # this profile's name and its ancestors', nearest first
    # The profile's own window (tokens, or a variable's name); None: the project's budget table.
    context_window: int | str | None = None
    output_reserve: int | str = 0

    def section(self, section_id: str) -> SectionPlan:
        return self._sections[section_id]

    @cached_property
    def _sections(self) -> dict[str, SectionPlan]:
        # Looked up a few dozen times per assembly: a dict, not a scan.
        return {s.id: s for s in self.sections}

    @cached_property
    def item_parts(self) -> dict[tuple[str, str], PartPlan]:
        """(section id, part id) -> part, for the parts that hold items."""
        return {(s.id, p.id): p for s in self.sections for p in s.parts if p.kind == "items"}

    @cached_property
    def window_deduped(self) -> frozenset[tuple[str, str]]:
        """(section id, part id) of the parts whose items are deduplicated against the window."""
        return frozenset(key for key, part in self.item_parts.items() if part.dedupe == "window")

    @cached_property
    def bounded_parts(self) -> frozenset[tuple[str, str]]:
        """(section id, part id) of the parts that hold passages from the project's index."""
        return frozenset((s.id, p.id) for s in self.sections for p in s.parts if p.bounded)

    @cached_property
    def mentioned_first(self) -> frozenset[tuple[str, str]]:
        """(section id, part id) of the parts whose items named near the cursor go first."""
        return frozenset((s.id, p.id) for s in self.sections for p in s.parts if p.rank == "mentioned_first")

    @cached_property
    def sources(self) -> frozenset[str]:
        """Every source an assembly with this plan gathers: its parts' and its conditions' facts'."""
        return frozenset(p.source for s in self.sections for p in s.parts) | frozenset(self.facts.values())

    @cached_property
    def window_section(self) -> SectionPlan | None:
        return next((s for s in self.sections if s.window_part is not None), None)

    def placement(self) -> dict[str, tuple[str, str]]:
        """Source name -> (section id, part id) for the sources that fill parts."""
        return {p.source: (s.id, p.id) for s in self.sections for p in s.parts}

    @cached_property
    def placed(self) -> Mapping[str, tuple[str, str]]:
        """Where each gathered source goes; a source wanted only for its facts goes nowhere ("")."""
        found = self.placement()
        for source in self.facts.values():
            found.setdefault(source, ("", source))
        return MappingProxyType(found)

    @cached_property
    def bound(self) -> bool:
        """Whether no number waits for a variable (nothing for :meth:`bind` to do)."""
        return not any(isinstance(v, str) for v in (self.context_window, self.output_reserve,
                                                   *(s.max for s in self.sections)))

    def bind(self, values: Mapping[str, str]) -> Plan:
        """The plan with every number a variable gives read from ``values`` (ValueError naming
        the variable when its value is not a whole number of tokens)."""
        if self.bound:
            return self

        def number(ref: int | str | None) -> int | None:
            if not isinstance(ref, str):
                return ref
            text = values.get(ref, self.variables.get(ref, "")).strip()
            if not (text.isascii() and text.isdigit()) or len(text) > 8 or int(text) > MAX_TOKENS:
                raise ValueError(ref)
            return int(text)

        sections = tuple(replace(s, max=number(s.max)) if isinstance(s.max, str) else s
                         for s in self.sections)
        return replace(self, sections=sections, context_window=number(self.context_window),
                       output_reserve=number(self.output_reserve) or 0)

    def with_budgets(self, ratios: Mapping[str, float], minimums: Mapping[str, int]) -> Plan:
        """The plan with these sections' ratios and minimums (the project's budget table)."""
        if all(ratios.get(s.id, s.ratio) == s.ratio and minimums.get(s.id, s.minimum) == s.minimum
               for s in self.sections):
            return self  # the table as the profile has it: most projects never change it
        sections = tuple(
            replace(s, ratio=ratios.get(s.id, s.ratio), minimum=minimums.get(s.id, s.minimum))
            for s in self.sections
        )
        return replace(self, sections=sections)
