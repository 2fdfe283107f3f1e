"""Compare a golden JSON value with a fresh one and describe the first difference readably.

Every field of the golden value must be present in the actual one and equal
to it; fields the actual value has beyond the golden ones (added to a result
later) are ignored, at every depth. Lists must have the same length and equal
elements in order. Everything else compares exactly, JSON type included (an
integer where the golden file has ``10.0`` is a difference: it changes the
bytes on the wire). No normalization is needed: repeated captures from fresh
data dirs, also under load, are identical, floats included (the engine rounds
every ordering key to 6 decimals itself).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

_CONTEXT = 60  # characters shown either side of the first differing character
_DIFF_LINES = 40


def first_difference(golden: Any, actual: Any, path: str = "") -> str | None:
    """None when ``actual`` holds everything ``golden`` does; else the first difference, described."""
    if isinstance(golden, Mapping):
        if not isinstance(actual, Mapping):
            return f"{path or '<root>'}: expected an object, got {_short(actual)}"
        for name in sorted(golden):
            where = f"{path}.{name}" if path else str(name)
            if name not in actual:
                return f"{where}: missing (golden {_short(golden[name])})"
            found = first_difference(golden[name], actual[name], where)
            if found is not None:
                return found
        return None
    if isinstance(golden, list):
        if not isinstance(actual, list):
            return f"{path}: expected a list, got {_short(actual)}"
        for n, (want, got) in enumerate(zip(golden, actual, strict=False)):
            label = f"{path}[{n}]"
            if isinstance(want, Mapping) and "id" in want:
                label += f"(id={want['id']})"
            found = first_difference(want, got, label)
            if found is not None:
                return found
        if len(golden) != len(actual):
            extra = actual[len(golden):] if len(actual) > len(golden) else golden[len(actual):]
            which = "actual has more" if len(actual) > len(golden) else "actual has fewer"
            return f"{path}: {len(golden)} items in golden, {len(actual)} now ({which}: {_short(extra)})"
        return None
    if isinstance(golden, str) and isinstance(actual, str):
        return None if golden == actual else f"{path}: {_string_difference(golden, actual)}"
    if type(golden) is not type(actual) or golden != actual:
        return f"{path}: golden {_short(golden)}, now {_short(actual)}"
    return None


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _string_difference(golden: str, actual: str) -> str:
    at = next((n for n, (a, b) in enumerate(zip(golden, actual, strict=False)) if a != b),
              min(len(golden), len(actual)))
    line = golden.count("\n", 0, at) + 1
    lo = max(0, at - _CONTEXT)
    lines = [
        f"strings differ at character {at} (line {line}; golden {len(golden)} chars, now {len(actual)}; "
        f"golden {len(golden.encode('utf-8', 'surrogatepass'))} bytes, now "
        f"{len(actual.encode('utf-8', 'surrogatepass'))})",
        f"  golden: {golden[lo:at + _CONTEXT]!r}",
        f"  now:    {actual[lo:at + _CONTEXT]!r}",
    ]
    if "\n" in golden or "\n" in actual:
        diff = list(difflib.unified_diff(golden.splitlines(), actual.splitlines(), "golden", "now",
                                         lineterm="", n=1))
        lines += diff[:_DIFF_LINES]
        if len(diff) > _DIFF_LINES:
            lines.append(f"... {len(diff) - _DIFF_LINES} more diff lines")
    return "\n".join(lines)
