"""From profile documents to a plan: flatten ``extends``, check every reference, build the plan.

Every problem is reported at once, each with the JSON pointer of what it is
about, so an editor can show it in place. A profile that resolves here never
fails at assembly time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from services.context.plan import Condition, Line, PartPlan, Plan, SectionPlan, StepPlan, localize
from services.profiles.catalog import DEFAULT_CATALOG, LITERAL, Catalog
from services.profiles.schema import ProfileDocument

_PART_KEYS = ("source", "content", "format", "rank", "dedupe", "audit")  # a one-source section's part
PLACEHOLDER = re.compile(r"(?<!\$)\$\{([^}]*)\}")  # $${...} is an escaped, literal ${...}
MAX_DEPTH = 8

Problem = dict[str, str]
Lookup = Callable[[str], Mapping[str, Any] | None]
"""A profile's raw document by name (built-in or the project's own), or None."""


class Invalid(Exception):
    """The profile has problems; each is ``{"path": JSON pointer, "message": ...}``."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(f"{len(problems)} problem(s)")
        self.problems = problems


@dataclass(frozen=True)
class Resolved:
    document: dict[str, Any]  # the flattened document, as JSON
    plan: Plan


def _pointer(*parts: object) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def parse(raw: Mapping[str, Any], at: str = "") -> ProfileDocument:
    """The document, or :class:`Invalid` with a problem per schema error."""
    try:
        return ProfileDocument.model_validate(raw)
    except ValidationError as exc:
        problems = [
            {
                "path": at + _pointer(*(p for p in error["loc"] if not str(p).startswith("function-"))),
                "message": error["msg"],
            }
            for error in exc.errors(include_url=False)
        ]
        raise Invalid(problems) from None


def _chain(document: ProfileDocument, lookup: Lookup) -> list[ProfileDocument]:
    """The document and its ancestors, root first."""
    chain = [document]
    names = [document.name]
    while chain[-1].extends is not None:
        parent_name = chain[-1].extends
        if parent_name in names:
            raise Invalid(
                [
                    {
                        "path": "/extends",
                        "message": "extends makes a cycle: " + " -> ".join([*names, parent_name]),
                    }
                ]
            )
        if len(chain) >= MAX_DEPTH:
            message = f"a profile extends at most {MAX_DEPTH - 1} others"
            raise Invalid([{"path": "/extends", "message": message}])
        raw = lookup(parent_name)
        if raw is None:
            raise Invalid([{"path": "/extends", "message": "no profile of this name to extend"}])
        try:
            chain.append(parse(raw))
        except Invalid:
            raise Invalid(
                [{"path": "/extends", "message": "the parent profile is invalid"}]
            ) from None
        names.append(parent_name)
    return list(reversed(chain))


def flatten(document: ProfileDocument, lookup: Lookup) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The document with ``extends`` applied (inherited sections, overrides and exclusions), and
    the names of the profiles it was made from, its own first."""
    problems: list[Problem] = []
    merged: dict[str, Any] = {
        "schema": document.schema_,
        "name": document.name,
        "variables": {},
        "sections": {},
    }
    if document.description is not None:
        merged["description"] = document.description
    chain = _chain(document, lookup)
    for depth, profile in enumerate(chain):
        own = depth == len(chain) - 1
        raw = profile.model_dump(by_alias=True, exclude_unset=True, exclude_none=True)
        merged["variables"].update(raw.get("variables", {}))
        for key in ("roles", "trim", "lastResort", "budget"):
            if key in raw:
                merged[key] = raw[key]
        for section_id, section in raw.get("sections", {}).items():
            at = _pointer("sections", section_id)
            inherited = merged["sections"].get(section_id)
            if section.get("exclude"):
                if inherited is None and own:
                    problems.append({"path": at + "/exclude", "message": "no inherited section to exclude"})
                elif inherited is not None and inherited.get("required") and own:
                    problems.append(
                        {"path": at + "/exclude", "message": "a required section cannot be excluded"}
                    )
                else:
                    merged["sections"].pop(section_id, None)
                continue
            body = {k: v for k, v in section.items() if k not in ("override", "exclude")}
            if inherited is not None:
                if not section.get("override"):
                    if own:
                        problems.append(
                            {
                                "path": at,
                                "message": "the parent has this section: set override to "
                                "replace it, or use another id",
                            }
                        )
                    continue
                if "parts" in body or "source" in body or "content" in body:
                    inherited = {
                        k: v for k, v in inherited.items() if k not in ("parts", "source", "content")
                    }
                body = {**inherited, **body}
            elif section.get("override") and own:
                problems.append({"path": at + "/override", "message": "no inherited section to override"})
            merged["sections"][section_id] = body
    if problems:
        raise Invalid(problems)
    return merged, tuple(p.name for p in reversed(chain))


# --- checks and the plan -------------------------------------------------------------------------


class _Builder:
    def __init__(self, flat: dict[str, Any], catalog: Catalog, lineage: tuple[str, ...]) -> None:
        self.flat = flat
        self.lineage = lineage
        self.catalog = catalog
        self.problems: list[Problem] = []
        self.variables = dict(flat.get("variables", {}))
        self.facts = catalog.facts()
        self.used_facts: set[str] = set()

    def problem(self, path: str, message: str) -> None:
        self.problems.append({"path": path, "message": message})

    def condition(self, raw: Any, at: str) -> Condition | None:
        if raw is None:
            return None
        if isinstance(raw, str):
            if raw in self.facts and raw not in self.variables:
                self.used_facts.add(raw)
            elif raw != "always" and raw not in self.variables:
                self.problem(at, "unknown condition: not a declared variable or a fact of a source")
            return raw
        ((op, arg),) = raw.items()
        if op == "not":
            return ("not", self.condition(arg, at + "/not"))
        return (op, tuple(self.condition(c, f"{at}/{op}/{n}") for n, c in enumerate(arg)))

    def placeholders(self, text: str, at: str) -> None:
        for name in PLACEHOLDER.findall(text):
            head = name.split(".", 1)[0]
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]{0,95}", name):
                self.problem(at, "a ${...} placeholder with an invalid name")
            elif name in self.variables or name in self.catalog.published:
                continue
            elif head in self.catalog.namespaces:
                self.problem(at, "a ${...} placeholder names an unknown variable: nothing publishes "
                             f"{name} (see the published {head}.* names)")
            else:
                self.problem(at, "a ${...} placeholder names an unknown variable: declare it under variables")

    def lines(self, raw: list[Any] | None, at: str) -> tuple[Line, ...]:
        out = []
        for n, line in enumerate(raw or []):
            # A string; {"text": ..., "condition": ...}; or a string per language ({"zh": ..., "en": ...}).
            text, cond = (line["text"], line.get("condition")) if isinstance(line, dict) and "text" in line \
                else (line, None)
            local = _local(text) if isinstance(text, dict) else None
            for one in (local.values() if local else (text,)):
                self.placeholders(one, f"{at}/{n}")
            out.append(Line(localize(local, "en") if local else text,
                            self.condition(cond, f"{at}/{n}/condition"), local))
        return tuple(out)

    def part(self, raw: Mapping[str, Any], at: str, default_id: str) -> PartPlan | None:
        source = raw.get("source") or LITERAL
        info = self.catalog.info(source)
        if info is None:
            self.problem(at + "/source", "unknown source")
            return None
        if raw.get("content") is not None and source != LITERAL:
            self.problem(at + "/content", "content lines belong to a literal source")
        fmt = raw.get("format") or {}
        for key in ("header", "begin", "end", "cursor", "group", "marker"):
            for text in [fmt[key]] if isinstance(fmt.get(key), str) else (fmt.get(key) or {}).values():
                if PLACEHOLDER.search(text):
                    self.problem(f"{at}/format/{key}", "formats take no placeholders")
        return PartPlan(
            id=raw.get("id", default_id),
            source=source,
            kind=info.kind,
            header=_local(fmt.get("header")),
            begin=_local(fmt.get("begin")),
            end=_local(fmt.get("end")),
            cursor=_local(fmt.get("cursor")),
            list_style=fmt.get("list", "plain"),
            separator=fmt.get("separator", "\n\n"),
            marker=fmt.get("marker"),
            content=self.lines(raw.get("content"), at + "/content"),
            condition=self.condition(raw.get("condition"), at + "/condition"),
            rank=raw.get("rank", "key"),
            dedupe=raw.get("dedupe", "text"),
            bounded=info.bounded,
            audit=bool(raw.get("audit")),
            group_header=_local(fmt.get("group")),
        )

    def steps(
        self, section_id: str, raw: list[Mapping[str, Any]], parts: tuple[PartPlan, ...], at: str
    ) -> tuple[StepPlan, ...]:
        out: list[StepPlan] = []
        ids = {p.id for p in parts}
        for n, step in enumerate(raw):
            step_id = step.get("id", step["step"])
            if any(s.id == step_id for s in out):
                self.problem(
                    f"{at}/{n}/id", "two steps of this section have the same id: give each its own"
                )
            for k, part in enumerate(step.get("parts") or []):
                if part not in ids:
                    self.problem(f"{at}/{n}/parts/{k}", "no part of this id in this section")
            if step["step"] == "summary_cue" and not step.get("cue") and not step.get("chars"):
                self.problem(f"{at}/{n}", "summary_cue needs a cue or chars")
            out.append(
                StepPlan(
                    section=section_id,
                    id=step_id,
                    step=step["step"],
                    target=step.get("target", "fit"),
                    floor=step.get("floor", "minimum"),
                    parts=tuple(step["parts"]) if step.get("parts") is not None else None,
                    origin=step.get("origin"),
                    order=_one(step.get("order", "key"), "key"),
                    part_orders=_each(step.get("order")),
                    chars=step.get("chars"),
                    cue=_local(step.get("cue")),
                    reason=_one(step.get("reason", "budget"), "budget"),
                    part_reasons=_each(step.get("reason")),
                    warn=step.get("warn"),
                    groups=bool(step.get("groups")),
                    keep=int(step.get("keep", 0)),
                    boundary=step.get("boundary", "near"),
                )
            )
        return tuple(out)

    def section(self, section_id: str, raw: Mapping[str, Any], role: str) -> SectionPlan:
        at = _pointer("sections", section_id)
        if raw.get("parts") and (raw.get("source") or raw.get("content") is not None):
            self.problem(at, "a section has either parts or a source and content, not both")
        if raw.get("parts") and any(k in raw for k in ("rank", "dedupe", "audit")):
            self.problem(at, "rank, dedupe and audit go on each part of a section with parts")
        raw_parts = raw.get("parts") or [
            {"id": section_id, **{k: raw[k] for k in _PART_KEYS if k in raw}}
        ]
        built = [
            self.part(p, f"{at}/parts/{n}" if raw.get("parts") else at, section_id)
            for n, p in enumerate(raw_parts)
        ]
        parts = tuple(p for p in built if p is not None)
        if len({p.id for p in parts}) != len(parts):
            self.problem(at + "/parts", "part ids must differ")
        if sum(p.kind == "window" for p in parts) > 1:
            self.problem(at + "/parts", "at most one document window per section")
        budget = raw.get("budget") or {}
        steps = self.steps(section_id, raw.get("reduce") or [], parts, at + "/reduce")
        if raw.get("never") and steps:
            self.problem(at + "/reduce", "a section marked never takes no reduction steps")
        warnings = raw.get("warnings") or {}
        return SectionPlan(
            id=section_id,
            parts=parts,
            role=role,  # type: ignore[arg-type]  # the schema allows only the three roles
            stable=bool(raw.get("stable")),
            condition=self.condition(raw.get("condition"), at + "/condition"),
            ratio=float(budget.get("ratio", 0.0)),
            minimum=int(budget.get("minimum", 0)),
            max=self.tokens(budget.get("max"), at + "/budget/max"),
            steps=steps,
            never=bool(raw.get("never")),
            candidates=raw.get("candidates"),
            overbudget_warning=warnings.get("overbudget"),
            truncated_warning=warnings.get("truncated"),
            separator=raw.get("separator", "\n\n"),
        )

    def roles(self) -> dict[str, str]:
        sections = self.flat["sections"]
        roles: dict[str, str] = {sid: s.get("role", "user") for sid, s in sections.items()}
        listed: dict[str, str] = {}
        for role, spec in (self.flat.get("roles") or {}).items():
            for n, sid in enumerate(spec.get("sections", [])):
                if sid not in sections:
                    continue  # excluded by a child, or named ahead of a child's own section
                if sid in listed:
                    self.problem(_pointer("roles", role, "sections", n),
                                 f"this section is already in role {listed[sid]}")
                listed[sid] = role
        return {**roles, **listed}

    def build(self) -> Plan:
        flat = self.flat
        roles = self.roles()
        ordered = sorted(flat["sections"].items(), key=lambda kv: (kv[1].get("order", 0), kv[0]))
        orders: dict[int, str] = {}
        for sid, raw in ordered:
            order = raw.get("order")
            if order is None:
                self.problem(_pointer("sections", sid, "order"), "every section needs an order")
            elif order in orders:
                self.problem(_pointer("sections", sid, "order"), "the same order as another section")
            else:
                orders[order] = sid
        sections = tuple(self.section(sid, raw, roles[sid]) for sid, raw in ordered)
        self.check_sections(sections)
        trim = self.trim(sections)
        window = flat.get("budget") or {}
        return Plan(
            name=flat["name"],
            sections=sections,
            trim=trim,
            last_resort=self.last_resort(sections, trim),
            variables={k: v.get("default") or "" for k, v in self.variables.items()},
            facts={f: s for f, s in self.facts.items() if f in self.used_facts},
            lineage=self.lineage,
            context_window=self.tokens(window.get("contextWindow"), "/budget/contextWindow"),
            output_reserve=self.tokens(window.get("outputReserve", 0), "/budget/outputReserve") or 0,
        )

    def tokens(self, value: int | str | None, at: str) -> int | str | None:
        """A number of tokens, or the name of the declared variable that will give it."""
        if not isinstance(value, str):
            return value
        name = value[2:-1]
        if name not in self.variables:
            self.problem(at, "names an unknown variable: declare it under variables")
        return name

    def check_sections(self, sections: tuple[SectionPlan, ...]) -> None:
        ratios = sum(s.ratio for s in sections)
        if ratios > 1 + 1e-9 or not math.isfinite(ratios):
            self.problem("/sections", f"the sections' budget ratios add up to {ratios:g}, above 1")
        seen_volatile = None
        sources: dict[str, str] = {}
        for s in sections:
            if s.stable and seen_volatile is not None:
                self.problem(
                    _pointer("sections", s.id, "stable"),
                    "stable sections come first: a section before this one is not stable",
                )
            if not s.stable and seen_volatile is None:
                seen_volatile = s.id
            for p in s.parts:
                if p.kind != "text" or p.source != LITERAL:
                    if p.source in sources:
                        self.problem(
                            _pointer("sections", s.id),
                            "its source already fills another section's part: a source fills one part",
                        )
                    sources[p.source] = s.id

    def trim(self, sections: tuple[SectionPlan, ...]) -> tuple[StepPlan, ...]:
        steps = {step.name: step for s in sections for step in s.steps}
        raw = self.flat.get("trim")
        if raw is None:  # the ladders of the last sections first
            return tuple(step for s in reversed(sections) for step in s.steps)
        out = []
        for n, name in enumerate(raw):
            if name not in steps:
                self.problem(_pointer("trim", n), "no reduction step of this name (section:step id)")
            elif steps[name] in out:
                self.problem(_pointer("trim", n), "this step is listed twice")
            else:
                out.append(steps[name])
        for s in sections:
            for n, step in enumerate(s.steps):
                if step not in out:
                    self.problem(_pointer("sections", s.id, "reduce", n),
                                 "this step is not in trim, so it would never run: list it there")
        return tuple(out)

    def last_resort(self, sections: tuple[SectionPlan, ...], trim: tuple[StepPlan, ...]) -> tuple[str, ...]:
        ids = [s.id for s in sections]
        raw = self.flat.get("lastResort")
        if raw is not None:
            for n, sid in enumerate(raw):
                if sid not in ids:
                    self.problem(_pointer("lastResort", n), "no section of this id")
            return tuple(sid for sid in raw if sid in ids)
        first = list(dict.fromkeys(s.section for s in trim if s.target == "fit"))
        rest = [s.id for s in reversed(sections) if s.id not in first and not s.never]
        never = [s.id for s in reversed(sections) if s.never]
        return tuple(first + rest + never)


def _one(value: Any, default: str) -> Any:
    """A step setting given once for all its parts, else ``default`` (each part has its own)."""
    return value if isinstance(value, str) else default


def _each(value: Any) -> dict[str, Any]:
    """A step setting given per part, else none."""
    return dict(value) if isinstance(value, dict) else {}


def _local(value: Any) -> Mapping[str, str] | None:
    if value is None:
        return None
    return {"en": value} if isinstance(value, str) else dict(value)


def resolve(raw: Mapping[str, Any], lookup: Lookup, catalog: Catalog = DEFAULT_CATALOG) -> Resolved:
    """Validate ``raw`` and everything it inherits; its flattened document and its plan."""
    document = parse(raw)
    flat, lineage = flatten(document, lookup)
    builder = _Builder(flat, catalog, lineage)
    plan = builder.build()
    if builder.problems:
        raise Invalid(builder.problems)
    return Resolved(document=flat, plan=plan)
