"""Who may open a websocket: Host, Origin and token checks, on plain values.

A localhost server is reachable from every web page the user visits, so the
handshake is checked three ways before any JSON-RPC is read:

* ``Host`` must name a loopback host and our port, which defeats DNS rebinding;
* ``Origin``, when a browser sends one, must fully match the allowlist, which
  defeats cross-site websocket hijacking;
* the token (``Authorization: Bearer T`` or ``?token=T``) must match, compared
  in constant time.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from ipc.context import Role

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})

# Loopback web origins on any port; the app's own custom-scheme origin.
DEFAULT_ORIGIN_PATTERNS: tuple[str, ...] = (
    r"https?://(?:127\.0\.0\.1|localhost|\[::1\])(?::[0-9]{1,5})?",
    r"app://strata",
)
FILE_ORIGIN_PATTERNS: tuple[str, ...] = (r"file://", r"null")


@dataclass(frozen=True)
class HandshakePolicy:
    token: str
    port: int
    inspector_token: str | None = None
    origin_patterns: tuple[str, ...] = DEFAULT_ORIGIN_PATTERNS
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", tuple(re.compile(p) for p in self.origin_patterns))

    def origin_allowed(self, origin: str) -> bool:
        # fullmatch, never match/search: "http://localhost.evil.com" must fail.
        return any(p.fullmatch(origin) for p in self._compiled)


def origin_patterns(extra: Sequence[str] = (), allow_file: bool = False) -> tuple[str, ...]:
    """The allowlist: defaults, ``file://``/``null`` if asked, then exact extras."""
    patterns = DEFAULT_ORIGIN_PATTERNS + (FILE_ORIGIN_PATTERNS if allow_file else ())
    return patterns + tuple(re.escape(origin) for origin in extra)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Either a role to serve the connection as, or an HTTP refusal."""

    role: Role | None
    status: HTTPStatus | None = None
    reason: str = ""


def host_allowed(host: str | None, port: int) -> bool:
    if not host:
        return False
    name, sep, host_port = host.strip().lower().rpartition(":")
    if not sep or name not in LOOPBACK_HOSTS:
        return False
    return host_port == str(port)


def presented_token(headers: Mapping[str, str], path: str) -> str | None:
    """The token from ``Authorization: Bearer``, else from ``?token=``."""
    authorization = headers.get("Authorization", "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    values = parse_qs(urlsplit(path).query).get("token")
    return values[0] if values else None


def _same(presented: str, expected: str | None) -> bool:
    if expected is None:
        return False
    return hmac.compare_digest(presented.encode(), expected.encode())


def judge_handshake(policy: HandshakePolicy, headers: Mapping[str, str], path: str) -> Verdict:
    """Decide whether a websocket handshake may proceed, and as which role."""
    if urlsplit(path).path != "/":
        return Verdict(None, HTTPStatus.NOT_FOUND, "not found")
    if not host_allowed(headers.get("Host"), policy.port):
        return Verdict(None, HTTPStatus.FORBIDDEN, "forbidden host")
    origin = headers.get("Origin")
    if origin is not None and not policy.origin_allowed(origin):
        return Verdict(None, HTTPStatus.FORBIDDEN, "forbidden origin")
    token = presented_token(headers, path)
    if token is None:
        return Verdict(None, HTTPStatus.UNAUTHORIZED, "missing token")
    # Check both so the time taken does not tell which token was close.
    is_client = _same(token, policy.token)
    is_inspector = _same(token, policy.inspector_token)
    if is_inspector:
        return Verdict(Role.INSPECTOR)
    if is_client:
        return Verdict(Role.CLIENT)
    return Verdict(None, HTTPStatus.UNAUTHORIZED, "invalid token")
