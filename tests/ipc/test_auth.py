"""Handshake decisions on plain values."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipc.auth import (
    HandshakePolicy,
    host_allowed,
    judge_handshake,
    origin_patterns,
    presented_token,
)
from ipc.context import Role

POLICY = HandshakePolicy(token="t" * 20, port=4000, inspector_token="i" * 20,
                         origin_patterns=origin_patterns())


def _headers(**extra: str) -> dict[str, str]:
    return {"Host": "127.0.0.1:4000", **extra}


def test_roles() -> None:
    """The client token gives the client role, the inspector token the inspector role."""
    assert judge_handshake(POLICY, _headers(Authorization=f"Bearer {'t' * 20}"), "/").role is Role.CLIENT
    verdict = judge_handshake(POLICY, _headers(), f"/?token={'i' * 20}")
    assert verdict.role is Role.INSPECTOR


def test_header_token_wins_over_query() -> None:
    """The Authorization header is read first; the query is the browser fallback."""
    assert presented_token({"Authorization": "Bearer abc"}, "/?token=def") == "abc"
    assert presented_token({"Authorization": "bearer  abc "}, "/") == "abc"
    assert presented_token({}, "/?token=def&x=1") == "def"
    assert presented_token({}, "/") is None


def test_refusal_order() -> None:
    """Path, then Host, then Origin, then token: each refusal has its HTTP status."""
    token = {"Authorization": f"Bearer {'t' * 20}"}
    assert judge_handshake(POLICY, _headers(**token), "/x").status is HTTPStatus.NOT_FOUND
    assert judge_handshake(POLICY, {"Host": "evil:4000", **token}, "/").status is HTTPStatus.FORBIDDEN
    assert judge_handshake(POLICY, _headers(Origin="https://evil.com", **token),
                           "/").status is HTTPStatus.FORBIDDEN
    assert judge_handshake(POLICY, _headers(), "/").status is HTTPStatus.UNAUTHORIZED


@pytest.mark.parametrize(("host", "ok"), [
    ("127.0.0.1:4000", True), ("localhost:4000", True), ("[::1]:4000", True),
    ("127.0.0.1", False), ("127.0.0.1:4001", False), ("::1:4000", False), (None, False),
    ("127.0.0.2:4000", False), ("0.0.0.0:4000", False),
])
def test_host(host: str | None, ok: bool) -> None:
    """Host must be a loopback name with the server's own port."""
    assert host_allowed(host, 4000) is ok


@given(st.text(min_size=1))
def test_no_suffix_extends_an_allowed_origin(suffix: str) -> None:
    """An allowed origin followed by anything that is not a port is refused."""
    for base in ("http://localhost", "http://127.0.0.1", "app://strata"):
        origin = base + suffix
        if suffix.startswith(":") and suffix[1:].isascii() and suffix[1:].isdigit() \
                and len(suffix) <= 6 and not base.startswith("app"):
            continue
        assert not POLICY.origin_allowed(origin)


@given(st.text(min_size=1))
def test_no_prefix_extends_an_allowed_origin(prefix: str) -> None:
    """Anything before an allowed origin makes it a different, refused origin."""
    assert not POLICY.origin_allowed(prefix + "http://localhost")
    assert not POLICY.origin_allowed(prefix + "app://strata")
