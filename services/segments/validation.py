"""Checking segments before anything is written: an upsert's segment, every entry of an import.

Problems name their place and what is wrong, never the value sent. An import
is checked whole, so one refusal lists every problem of every entry
(``[{index, field, message}]``); an upsert's problems are reported like the
dispatcher's (``errors: [{loc, type, msg}]``, ``loc`` starting at ``segment``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from services.errors import InvalidInput
from services.segments.records import SCOPES, ImportEntry, SegmentInput

MAX_PROBLEMS = 1000  # listed in one refusal; ``problemCount`` says how many there were
REF_ID_NEEDED = "is required unless scope is core"


def _field(loc: Sequence[int | str]) -> str:
    return ".".join(str(part) for part in loc)


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [{"loc": list(err["loc"]), "type": err["type"], "msg": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False, include_context=False)]


def needs_ref_id(scope: str | None, ref_id: str | None) -> bool:
    """Whether a segment of ``scope`` with this ``ref_id`` lacks the refId its scope needs."""
    return scope is not None and scope != "core" and ref_id is None


def segment_input(segment: SegmentInput | Mapping[str, Any]) -> SegmentInput:
    """An upsert's segment, checked (INVALID_PARAMS with ``errors`` located under ``segment``)."""
    if isinstance(segment, SegmentInput):
        checked = segment
    else:
        try:
            checked = SegmentInput.model_validate(segment)
        except ValidationError as exc:
            raise InvalidInput(errors=[{**err, "loc": ["segment", *err["loc"]]}
                                       for err in _errors(exc)]) from None
    if checked.id is None:
        errors = [{"loc": ["segment", name], "type": "missing", "msg": "is required to create a segment"}
                  for name in ("scope", "content") if getattr(checked, name) is None]
        if needs_ref_id(checked.scope, checked.ref_id):
            errors.append({"loc": ["segment", "refId"], "type": "missing", "msg": REF_ID_NEEDED})
        if errors:
            raise InvalidInput(errors=errors)
    return checked


def refused(problems: list[dict[str, Any]]) -> InvalidInput:
    """The import's refusal: INVALID_PARAMS with the (first :data:`MAX_PROBLEMS`) problems."""
    return InvalidInput(f"Nothing was imported: {len(problems)} problem(s) in the segments",
                        problems=problems[:MAX_PROBLEMS], problemCount=len(problems))


def check_import(entries: Sequence[Any]) -> tuple[list[ImportEntry], list[dict[str, Any]]]:
    """Every entry checked: the valid ones, and every problem of the others.

    Besides each entry's own fields: a scope other than core needs a refId, and one
    import names an id at most once.
    """
    valid: list[ImportEntry] = []
    problems: list[dict[str, Any]] = []
    seen: set[int] = set()
    for index, raw in enumerate(entries):
        if not isinstance(raw, Mapping):
            problems.append({"index": index, "field": "", "message": "must be a segment object"})
            continue
        found: list[dict[str, Any]] = []
        entry: ImportEntry | None = None
        try:
            entry = ImportEntry.model_validate(raw)
        except ValidationError as exc:
            found = [{"index": index, "field": _field(err["loc"]), "message": err["msg"]}
                     for err in _errors(exc)]
        scope = raw.get("scope")
        ref_id = raw.get("refId", raw.get("ref_id"))
        if (isinstance(scope, str) and scope in SCOPES and needs_ref_id(scope, ref_id)
                and not any(p["field"] == "refId" for p in found)):
            found.append({"index": index, "field": "refId", "message": REF_ID_NEEDED})
        segment_id = raw.get("id")
        if isinstance(segment_id, int) and not isinstance(segment_id, bool):
            if segment_id in seen:
                found.append({"index": index, "field": "id",
                              "message": "names a segment another entry of this import names"})
            seen.add(segment_id)
        if found:
            problems += found
        elif entry is not None:
            valid.append(entry)
    return valid, problems
