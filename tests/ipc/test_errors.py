"""One error hierarchy: every condition has one stable number and one stable string code."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import ipc.errors as wire
import services.errors as domain
from ipc.errors import (
    InternalError,
    InvalidParams,
    ProfileConflict,
    ProfileInvalid,
    ProfileNotFound,
    ProfileReadOnly,
    RpcError,
    TooManyRequests,
    all_error_classes,
)
from services.errors import CODE_BLOCKS, STANDARD_CODES, StrataError

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_DOC = ROOT / "docs" / "protocol.md"


def conditions() -> list[type[StrataError]]:
    """Every error class Strata itself defines (test-only subclasses left out)."""
    return [c for c in all_error_classes() if not c.__module__.startswith("tests.")]


def block_of(code: int) -> tuple[int, int, str] | None:
    return next((b for b in CODE_BLOCKS if b[0] >= code >= b[1]), None)


def test_one_hierarchy() -> None:
    """Protocol and domain errors share one base, and ipc.errors re-exports the domain classes themselves."""
    assert RpcError is StrataError
    assert domain.InvalidInput is InvalidParams
    assert all(issubclass(c, StrataError) for c in conditions())
    shared = set(wire.__all__) & set(vars(domain))
    assert {"ProjectNotFound", "InvalidParams", "ProfileInvalid"} <= shared
    for name in shared:
        assert getattr(wire, name) is getattr(domain, name), name


def test_services_errors_do_not_import_ipc() -> None:
    """Dependencies point downward: services.errors imports nothing from ipc or main."""
    tree = ast.parse(Path(domain.__file__).read_text(encoding="utf-8"))
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m.split(".")[0] in {"ipc", "main"}}


def test_data_codes_are_unique() -> None:
    """No two conditions share a data.code, so a client can branch on it alone."""
    data_codes = [c.data_code for c in conditions()]
    assert len(data_codes) == len(set(data_codes))
    assert all(re.fullmatch(r"[A-Z][A-Z_]*", code) for code in data_codes)


def test_blocks_are_disjoint_application_ranges() -> None:
    """The allocated blocks lie inside -32000..-32099 and do not overlap."""
    spans = sorted((low, high) for high, low, _ in CODE_BLOCKS)
    assert spans[0][0] >= -32099
    assert spans[-1][1] <= -32000
    assert all(a_high < b_low for (_, a_high), (b_low, _) in itertools.pairwise(spans))


def test_numbers_sit_in_their_blocks() -> None:
    """Every number is a JSON-RPC standard one or inside an allocated application block."""
    for cls in conditions():
        assert cls.code in STANDARD_CODES or block_of(cls.code) is not None, cls


def test_one_number_per_application_condition() -> None:
    """An application number is used by exactly one condition (only standard numbers are shared)."""
    app = [c.code for c in conditions() if c.code not in STANDARD_CODES]
    assert len(app) == len(set(app))


def test_profile_block() -> None:
    """-32050..-32059 is the profiles block: the four profile conditions, in order, and nothing else."""
    assert block_of(-32050) == (-32050, -32059, "profiles")
    in_block = [(c.code, c.data_code) for c in conditions() if block_of(c.code) == block_of(-32050)]
    assert sorted(in_block, reverse=True) == [
        (-32050, "PROFILE_NOT_FOUND"),
        (-32051, "PROFILE_INVALID"),
        (-32052, "PROFILE_CONFLICT"),
        (-32053, "PROFILE_READ_ONLY"),
    ]
    assert ProfileNotFound.message == "No profile with this name"
    assert ProfileReadOnly.message == "Built-in profiles cannot be changed; save a copy under another name"


def test_error_shape() -> None:
    """to_error gives code, message and data with the string code and the fields, for any class."""
    assert TooManyRequests(limit=4).to_error() == {
        "code": -32000,
        "message": "Too many requests in flight on this connection",
        "data": {"code": "RPC_TOO_MANY_REQUESTS", "limit": 4},
    }
    assert InternalError(errorId="abc").to_error()["data"] == {"code": "INTERNAL", "errorId": "abc"}
    problems = [{"path": "/sections/0/budget/ratio", "message": "must be at most 1"}]
    assert ProfileInvalid(problems=problems).to_error() == {
        "code": -32051,
        "message": "The profile is not valid",
        "data": {"code": "PROFILE_INVALID", "problems": problems},
    }
    assert ProfileConflict(currentVersion=3).to_error() == {
        "code": -32052,
        "message": "The profile was changed since this version was read",
        "data": {"code": "PROFILE_CONFLICT", "currentVersion": 3},
    }


def test_custom_message() -> None:
    """A raise site may give a clearer message without changing the codes."""
    err = InvalidParams("cursorPosition is outside the document", length=12)
    assert err.to_error() == {"code": -32602, "message": "cursorPosition is outside the document",
                              "data": {"code": "INVALID_PARAMS", "length": 12}}
    assert str(err) == "cursorPosition is outside the document"


def test_every_condition_is_documented() -> None:
    """docs/protocol.md has one row per condition with its number and data.code, and no stale rows."""
    text = PROTOCOL_DOC.read_text(encoding="utf-8")
    rows = {(int(n), c) for n, c in re.findall(r"^\| (-\d+) \| `([A-Z_]+)` \|", text, re.MULTILINE)}
    assert rows == {(c.code, c.data_code) for c in conditions()}
    for high, low, what in CODE_BLOCKS:
        assert f"{high}..{low} {what}" in " ".join(text.split()), what
