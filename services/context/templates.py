"""The bodies of text parts: a profile's own content lines, the caller's text, the instruction.

``${name}`` placeholders are expanded in one pass over the profile's own
lines only. A value is inserted as it is: a ``${...}`` inside a writer's text,
a document, a memory or a variable's value stays literal text, and nothing is
ever expanded twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from services.context.plan import PartPlan, Plan, holds
from services.context.render import list_body

PLACEHOLDER = re.compile(r"\$(\$?)\{([A-Za-z][A-Za-z0-9_.,]{0,95})\}")
REQUEST_PREFIX = "request."


def _value(match: re.Match[str], values: Mapping[str, str]) -> str:
    if match.group(1):  # $${...} is the text ${...}: a token for the client, such as ${image.TAG}
        return match.group(0)[1:]
    return values.get(match.group(2), "")


def expand(line: str, values: Mapping[str, str]) -> str:
    """``line`` with each ``${name}`` replaced by its value ("" when it has none), in one pass;
    ``$${name}`` stays as the text ``${name}``."""
    if "${" not in line:
        return line
    return PLACEHOLDER.sub(lambda m: _value(m, values), line)


def literal_body(part: PartPlan, values: Mapping[str, str], facts: frozenset[str],
                 language: str = "en") -> str:
    """The part's lines whose conditions hold, in ``language``, expanded; a line left blank by
    expansion goes, and numbering comes after both, so it has no gaps."""
    lines = []
    for line in part.content:
        if not holds(line.condition, facts):
            continue
        text = expand(line.for_language(language), values)
        if text.strip():
            lines.append(text)
    if part.list_style == "plain":
        return "\n".join(lines)
    return list_body(part, lines)


def resolve_texts(
    plan: Plan, language: str, variables: Mapping[str, str], facts: frozenset[str], instruction: str | None
) -> dict[tuple[str, str], str]:
    """(section id, part id) -> body, for every text part of ``plan``."""
    values = {**plan.variables, **variables}
    texts: dict[tuple[str, str], str] = {}
    for section in plan.sections:
        for part in section.parts:
            if part.kind != "text":
                continue
            if part.source == "literal":
                body = literal_body(part, values, facts, language)
            elif part.source == "instruction":
                body = instruction or ""
            elif part.source.startswith(REQUEST_PREFIX):
                body = values.get(part.source.removeprefix(REQUEST_PREFIX), "")
                body = body if body.strip() else ""
            else:
                body = ""
            texts[(section.id, part.id)] = body
    return texts
