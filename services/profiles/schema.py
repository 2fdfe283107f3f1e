"""The profile document (``strata.profile/1``): an ordered set of prompt sections, as data.

These models describe what a profile *says*; :mod:`services.profiles.resolve`
flattens ``extends`` and checks what the schema alone cannot (sources,
variables, references between sections). The JSON Schema that ``rpc.discover``
publishes is generated from :class:`ProfileDocument`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

SCHEMA = "strata.profile/1"
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
MAX_SECTIONS = 64
MAX_LINES = 256
MAX_LINE_CHARS = 4096

Text = Annotated[str, Field(max_length=MAX_LINE_CHARS)]
LanguageTag = Annotated[str, Field(pattern=r"^[a-z]{2,3}(-[A-Za-z0-9]{1,8}){0,2}$", max_length=16)]
LocalText = Text | dict[LanguageTag, Text]
"""A string, or one string per language (``{"zh": ..., "en": ...}``; ``en`` is the fallback)."""


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, allow_inf_nan=False
    )


class Not(_Model):
    not_: Condition = Field(alias="not")


class All(_Model):
    all: list[Condition] = Field(min_length=1, max_length=16)


class Any_(_Model):
    any: list[Condition] = Field(min_length=1, max_length=16)


Condition = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.]{0,63}$")] | Not | All | Any_
"""A fact's name (``always``, ``isFirstTurn``, ``hasMemories``...) or a ``not``/``all``/``any`` of them."""
for _combinator in (Not, All, Any_):
    _combinator.model_rebuild()


class Line(_Model):
    """A content line shown only when its condition holds (numbered lists skip it, without a gap)."""

    text: LocalText
    condition: Condition | None = None


class Format(_Model):
    """How a part is written: an optional header or begin/end delimiters, and its list style."""

    header: LocalText | None = None
    begin: LocalText | None = None
    end: LocalText | None = None
    cursor: LocalText | None = Field(default=None, description="document.window: marks the cursor")
    group: LocalText | None = Field(
        default=None, description="items by their group, each under this line; {group} is the group's name")
    list: Literal["plain", "numbered", "bulleted"] = "plain"
    separator: Text | None = Field(
        default=None, description="between items of a plain list; default a blank line"
    )
    marker: Annotated[str, Field(max_length=32)] | None = Field(
        default=None,
        description="numbered: what goes before each item, {n} its number (default \"{n}. \"); "
        "bulleted: the bullet (default \"- \")",
    )


VarRef = Annotated[str, Field(pattern=r"^\$\{[A-Za-z][A-Za-z0-9_]{0,63}\}$")]
"""A number the request gives: ``"${tokenBudget}"`` takes the declared variable's value."""
Tokens = Annotated[int, Field(ge=0, le=10_000_000)] | VarRef


class Budget(_Model):
    ratio: float = Field(default=0.0, ge=0, le=1, description="share of the total budget")
    minimum: int = Field(default=0, ge=0, le=10_000_000, description="tokens the first pass never goes under")
    max: Tokens | None = Field(default=None, description="a cap for `cap` reduction steps (tokens or ${var})")


class ProfileBudget(_Model):
    """The profile's own context window, instead of the project's budget table."""

    context_window: Tokens = Field(description="tokens, or a ${variable} the request sets")
    output_reserve: Tokens = 0


Reason = Annotated[str, Field(pattern=r"^[a-z_]{1,32}$")]
Order = Literal["key", "reverse"]
PartId = Annotated[str, Field(pattern=ID_PATTERN)]
StepName = Literal["drop_lowest", "cut_far_end", "trim_chars", "summary_cue", "lower_tier", "drop_section"]


class Step(_Model):
    """One rung of a section's reduction ladder; ``trim`` names it as ``section:id``."""

    step: StepName
    id: Annotated[str, Field(pattern=ID_PATTERN)] | None = Field(
        default=None, description="default: the step"
    )
    target: Literal["fit", "cap"] = Field(
        default="fit",
        description="fit: run while the prompt is over the total; cap: while the section is "
        "over its cap (budget.max, else the larger of its share and its minimum)",
    )
    floor: Literal["minimum", "none"] = Field(
        default="minimum", description="whether this step may take the section under its minimum"
    )
    parts: list[Annotated[str, Field(pattern=ID_PATTERN)]] | None = Field(
        default=None, max_length=16, description="the parts it reduces, in this order (default all)"
    )
    origin: Literal["user", "kg", "project"] | None = Field(
        default=None, description="drop_lowest: only items of this origin"
    )
    order: Order | dict[PartId, Order] = Field(
        default="key", description="drop_lowest: lowest key first, or reverse render order; or one per part"
    )
    chars: int | None = Field(
        default=None, ge=1, le=1_000_000, description="trim_chars, summary_cue: the length"
    )
    cue: LocalText | None = Field(
        default=None, description="summary_cue: the text that stands for the section"
    )
    keep: int = Field(default=0, ge=0, le=10_000,
                      description="drop_lowest: items (or groups) this step always leaves")
    boundary: Literal["near", "sentence"] = Field(
        default="near",
        description="cut_far_end on text parts: near: on a sentence end when one is near, else "
        "anywhere; sentence: only on a sentence end, however far back (with floor minimum, a text "
        "whose first sentence does not fit is left whole)",
    )
    groups: bool = Field(default=False,
                         description="drop_lowest: whole groups (e.g. an NPC), lowest key first")
    reason: Reason | dict[PartId, Reason] | None = Field(
        default=None, description="the reason given to dropped items (default: budget); or one per part"
    )
    warn: Literal["below_minimum", "overbudget"] | None = None


Rank = Literal["key", "user_first", "mentioned_first", "given"]
RANK_DOC = ("render order of items: by key (highest first); the writer's own first; named near the cursor "
            "first; as the source gave them")


class Part(_Model):
    """One source's content inside a section, with its own format."""

    id: Annotated[str, Field(pattern=ID_PATTERN)]
    source: Annotated[str, Field(max_length=96)]
    content: list[LocalText | Line] | None = Field(default=None, max_length=MAX_LINES)
    format: Format = Format()
    condition: Condition | None = None
    rank: Rank = Field(default="key", description=RANK_DOC)
    audit: bool = Field(default=False, description="log the ids of items cut from this part")
    dedupe: Literal["id", "text", "window"] = Field(
        default="text", description="screening: by id only; also by text; also against the window text"
    )


class Warnings(_Model):
    overbudget: Text | None = Field(default=None, description="with {tokens} and {cap}")
    truncated: Text | None = None


class Section(_Model):
    """A block of the prompt. Either one source (``source``/``content``/``format``) or ``parts``."""

    order: int | None = Field(default=None, ge=-1_000_000, le=1_000_000)
    required: bool = False
    condition: Condition | None = None
    source: Annotated[str, Field(max_length=96)] | None = None
    content: list[LocalText | Line] | None = Field(default=None, max_length=MAX_LINES)
    format: Format | None = None
    rank: Rank | None = Field(default=None, description="with source: " + RANK_DOC)
    dedupe: Literal["id", "text", "window"] | None = Field(default=None, description="with source: see Part")
    audit: bool | None = Field(default=None, description="with source: see Part")
    parts: list[Part] | None = Field(default=None, max_length=16)
    budget: Budget | None = None
    reduce: list[Step] | None = Field(default=None, max_length=16)
    never: bool = Field(default=False, description="never reduced, except as the last resort")
    stable: bool | None = Field(default=None, description="part of the cacheable prefix")
    role: Literal["system", "user", "assistant"] | None = None
    candidates: int | None = Field(
        default=None, ge=1, le=10_000, description="at most this many items screened in"
    )
    warnings: Warnings | None = None
    separator: Text | None = Field(default=None, description="between the parts of this section; "
                                   "default a blank line")
    override: bool = Field(default=False, description="replace the parent's section of this id")
    exclude: bool = Field(default=False, description="remove the parent's section of this id")


class Role(_Model):
    sections: list[Annotated[str, Field(pattern=ID_PATTERN)]] = Field(max_length=MAX_SECTIONS)


class Variable(_Model):
    description: Text | None = None
    default: Text | None = None


class ProfileDocument(_Model):
    """A profile as stored and exchanged."""

    schema_: Literal["strata.profile/1"] = Field(alias="schema")
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: Text | None = None
    extends: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    budget: ProfileBudget | None = None
    variables: dict[Annotated[str, Field(pattern=ID_PATTERN)], Variable] = Field(
        default_factory=dict, max_length=64
    )
    sections: dict[Annotated[str, Field(pattern=ID_PATTERN)], Section] = Field(
        default_factory=dict, max_length=MAX_SECTIONS
    )
    roles: dict[Literal["system", "user", "assistant"], Role] | None = None
    trim: list[Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*:[A-Za-z][A-Za-z0-9_-]*$")]] | None = (
        Field(default=None, max_length=256)
    )
    last_resort: list[Annotated[str, Field(pattern=ID_PATTERN)]] | None = Field(
        default=None, max_length=MAX_SECTIONS
    )


def json_schema() -> dict[str, Any]:
    """The profile document's JSON Schema, as published by ``rpc.discover``."""
    return ProfileDocument.model_json_schema(by_alias=True)
