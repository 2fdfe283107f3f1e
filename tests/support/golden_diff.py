"""Compare a golden JSON value with a fresh one and describe the first difference readably.

Every field of the golden value must be present in the actual one and equal
to it; fields the actual value has beyond the golden ones (added to a result
later) are ignored, at every depth. Lists must have the same length and equal
elements in order. Everything else compares exactly, JSON type included (an
integer where the golden file has ``10.0`` is a difference: it changes the
bytes on the wire). No normalization is needed: repeated captures from fresh
data dirs, also under load, are identical, floats included (the engine rounds
every ordering key to 6 decimals itself).

One exception: a candidate's ordering ``key`` may differ from the golden one by
up to :data:`KEY_TOLERANCE`. Retrieval scores come from float32 vector
arithmetic whose last bits depend on the CPU's vector instructions (numpy and
OpenBLAS pick AVX2 or AVX-512 kernels at run time), so a key rounded to 6
decimals can move by one in the last place from one machine to another. The
same machine always gives the same keys, and the fates, prompts and hashes are
still compared exactly. For the same reason two candidates whose keys are equal
within that tolerance (one passage and its copy in another file) may come in
either order: :func:`align_ties` puts them in the golden order before comparing.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

_CONTEXT = 60  # characters shown either side of the first differing character
KEY_TOLERANCE = 5e-6  # a few units in the 6th decimal: float32 rounding across CPUs
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
    if path.endswith(".key") and type(golden) is float and type(actual) is float:
        return None if abs(golden - actual) <= KEY_TOLERANCE else f"{path}: golden {golden!r}, now {actual!r}"
    if type(golden) is not type(actual) or golden != actual:
        return f"{path}: golden {_short(golden)}, now {_short(actual)}"
    return None


def align_ties(golden: list[Any], actual: list[Any]) -> list[Any]:
    """``actual`` with each run of candidates whose keys equal the golden one's within
    :data:`KEY_TOLERANCE` put in the golden order (nothing else moves)."""
    aligned = list(actual)
    for n, want in enumerate(golden[:len(aligned)]):
        here = aligned[n]
        if not isinstance(want, Mapping) or not isinstance(here, Mapping) or here.get("id") == want.get("id"):
            continue
        for m in range(n, len(aligned)):
            if not _tied(aligned[m], want):
                break
            if aligned[m].get("id") == want.get("id"):
                aligned.insert(n, aligned.pop(m))
                break
    return aligned


def _tied(candidate: Any, want: Mapping[str, Any]) -> bool:
    key, wanted = (candidate.get("key") if isinstance(candidate, Mapping) else None), want.get("key")
    return type(key) is float and type(wanted) is float and abs(key - wanted) <= KEY_TOLERANCE


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
