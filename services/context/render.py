"""Render a section's parts into prompt text, in the plan's order and formats.

Rendering depends only on the plan, the kept content and the language, so the
same content always gives the same bytes; that is what makes the stable
prefix stable. A part with nothing to show renders nothing at all: no header,
no empty delimiter pair; a section with no part to show disappears.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from services.context.models import Item
from services.context.plan import PartPlan, Plan, SectionPlan, localize

SEPARATOR = "\n\n"


def list_body(part: PartPlan, texts: Sequence[str]) -> str:
    """Texts as the part's list: numbered after every cut (so without gaps), bulleted or plain."""
    if part.list_style == "numbered":
        if part.marker is None:
            return "\n".join(f"{n}. {text}" for n, text in enumerate(texts, start=1))
        mark = part.marker
        return "\n".join(mark.replace("{n}", str(n)) + text for n, text in enumerate(texts, start=1))
    if part.list_style == "bulleted":
        bullet = "- " if part.marker is None else part.marker
        return "\n".join(bullet + text for text in texts)
    return part.separator.join(texts)


def grouped_body(part: PartPlan, items: Sequence[Item], language: str) -> str:
    """Items by their ``group``, in order of first appearance, each group under its own header line
    (``{group}`` in the part's group header stands for the group's name)."""
    groups: dict[str, list[str]] = {}
    for item in items:
        groups.setdefault(item.group or "", []).append(item.text)
    header = localize(part.group_header, language)
    return "\n".join(f"{header.replace('{group}', name)}\n{list_body(part, texts)}"
                     for name, texts in groups.items())


Frame = tuple[str, str]  # what goes before a part's body and after it


def frame(part: PartPlan, language: str) -> Frame:
    """The part's header and begin lines before its body, its end line after."""
    head = [line for line in (localize(part.header, language), localize(part.begin, language)) if line]
    end = localize(part.end, language)
    return ("\n".join(head) + "\n" if head else "", "\n" + end if end else "")


def wrap(part: PartPlan, body: str, language: str, frames: dict[tuple[str, str], Frame] | None = None,
         section_id: str = "") -> str:
    """``body`` under the part's header and inside its begin/end delimiters; nothing if empty.
    ``frames`` keeps each part's frame for the assembly, which renders a section many times."""
    if not body:
        return ""
    if frames is None:
        before, after = frame(part, language)
    else:
        key = (section_id, part.id)
        found = frames.get(key)
        if found is None:
            found = frames[key] = frame(part, language)
        before, after = found
    return before + body + after


def window_body(before: str, after: str, cursor_mark: str) -> str:
    """The text around the cursor, the cursor marked where text follows it."""
    return before + (cursor_mark + after if after else "")


def render_section(section: SectionPlan, items: Iterable[Item], texts: Mapping[str, str],
                   language: str, frames: dict[tuple[str, str], Frame] | None = None) -> str:
    """One section's text: each part with something to show, in the plan's order.

    ``items`` are the section's kept items in render order; ``texts`` holds the
    already-rendered bodies of its window and text parts by part id.
    """
    by_part: dict[str, list[Item]] = {}
    for item in items:
        by_part.setdefault(item.section, []).append(item)
    parts = []
    for part in section.parts:
        if part.kind == "items":
            found = by_part.get(part.id)
            body = "" if not found else (grouped_body(part, found, language) if part.group_header
                                         else list_body(part, [i.text for i in found]))
        else:
            body = texts.get(part.id, "")
        text = wrap(part, body, language, frames, section.id)
        if text:
            parts.append(text)
    return section.separator.join(parts)


def join_sections(plan: Plan, texts: Mapping[str, str]) -> tuple[str, dict[str, int]]:
    """The prompt, and the character offset where each section's text ends in it."""
    prompt = ""
    ends: dict[str, int] = {}
    for section in plan.sections:
        text = texts.get(section.id, "")
        if text:
            prompt = prompt + SEPARATOR + text if prompt else text
        ends[section.id] = len(prompt)
    return prompt, ends
