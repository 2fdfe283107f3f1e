"""Render layer items into prompt text, section by section, in a fixed order.

Rendering depends only on the items and the language, so the same content
always gives the same bytes; that is what makes the stable prefix stable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from services.context.models import LAYER_ORDER, Item, Layer, Window

LAYER_SEPARATOR = "\n\n"

# Sections in rendering order within each layer.
SECTIONS: dict[Layer, tuple[str, ...]] = {
    Layer.RULES: ("constraints", "narrative", "entities"),
    Layer.SETTINGS: ("preferences", "style"),
    Layer.RETRIEVED: ("passages", "history"),
    Layer.IMMEDIATE: ("window", "instruction"),
}

HEADERS: dict[str, dict[str, str]] = {
    "zh": {
        "constraints": "[创作约束 - 不可违反]",
        "narrative": "[叙述设定]",
        "entities": "[角色与世界设定]",
        "preferences": "[写作偏好]",
        "style": "[风格说明]",
        "passages": "[相关前文]",
        "history": "[历史交互参考]",
        "window": "[当前正文]",
        "instruction": "[用户指令]",
    },
    "en": {
        "constraints": "[Writing constraints - must not be violated]",
        "narrative": "[Narrative]",
        "entities": "[Characters and world]",
        "preferences": "[Writing preferences]",
        "style": "[Style notes]",
        "passages": "[Relevant earlier passages]",
        "history": "[Past interactions]",
        "window": "[Current text]",
        "instruction": "[Instruction]",
    },
}

CURSOR_MARK = {"zh": "【光标】", "en": "[[cursor]]"}


def _body(section: str, items: Sequence[Item]) -> str:
    if section == "constraints":
        # Numbered without gaps, whatever was cut.
        return "\n".join(f"{n}. {item.text}" for n, item in enumerate(items, start=1))
    if section in ("entities", "preferences"):
        return "\n".join(f"- {item.text}" for item in items)
    return "\n\n".join(item.text for item in items)


def render_sections(layer: Layer, items: Iterable[Item], language: str) -> str:
    """One layer's text: each non-empty section as a header line and its body."""
    headers = HEADERS.get(language, HEADERS["en"])
    by_section: dict[str, list[Item]] = {}
    for item in items:
        by_section.setdefault(item.section, []).append(item)
    parts = [f"{headers[s]}\n{_body(s, by_section[s])}" for s in SECTIONS[layer] if by_section.get(s)]
    return LAYER_SEPARATOR.join(parts)


def render_window(window: Window | None, instruction: str | None, language: str) -> str:
    """The Immediate layer: the text around the cursor, then the writer's instruction."""
    headers = HEADERS.get(language, HEADERS["en"])
    parts = []
    if window is not None and (window.before or window.after):
        text = window.before + (CURSOR_MARK.get(language, CURSOR_MARK["en"]) + window.after
                                if window.after else "")
        parts.append(f"{headers['window']}\n{text}")
    if instruction:
        parts.append(f"{headers['instruction']}\n{instruction}")
    return LAYER_SEPARATOR.join(parts)


def join_layers(texts: dict[Layer, str]) -> tuple[str, dict[Layer, int]]:
    """The prompt, and the character offset where each layer's text ends in it."""
    prompt = ""
    ends: dict[Layer, int] = {}
    for layer in LAYER_ORDER:
        text = texts.get(layer, "")
        if text:
            prompt = prompt + LAYER_SEPARATOR + text if prompt else text
        ends[layer] = len(prompt)
    return prompt, ends
