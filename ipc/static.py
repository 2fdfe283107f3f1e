"""The debug inspector page, answered as plain HTTP before any websocket handshake.

Only in debug mode, and only the few files of an allowlist: a request path is
looked up in a fixed table, never joined onto a folder, so no path can reach
another file. The files are read from ``renderer-stub/`` at the repository
root (beside this package) on each request, so an edited page shows on reload.

The page needs no token to load; it asks the user for the inspector token (or
takes it from ``location.hash``, which browsers never send to the server) and
opens its websocket with it. Every answer forbids caching and sniffing and
carries a strict Content-Security-Policy: scripts, styles and images only from
this origin, websockets only to loopback.

Only ``GET`` and ``HEAD`` are answered (``HEAD``: the headers of ``GET``, no
body); any other method is **405** with ``Allow: GET, HEAD``.
"""

from __future__ import annotations

import email.utils
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Response

STATIC_ROOT = Path(__file__).resolve().parents[1] / "renderer-stub"

INSPECTOR_PATH = "/inspector"
ALLOWED_METHODS = ("GET", "HEAD")
INSPECTOR_PREFIX = INSPECTOR_PATH + "/"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self' ws://127.0.0.1:* ws://localhost:*; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@dataclass(frozen=True, slots=True)
class StaticFile:
    name: str
    content_type: str


# Request path -> file in STATIC_ROOT. Nothing else is ever served.
INSPECTOR_FILES: dict[str, StaticFile] = {
    INSPECTOR_PREFIX: StaticFile("inspector.html", "text/html; charset=utf-8"),
    INSPECTOR_PREFIX + "inspector.js": StaticFile("inspector.js", "text/javascript; charset=utf-8"),
    INSPECTOR_PREFIX + "inspector.css": StaticFile("inspector.css", "text/css; charset=utf-8"),
    INSPECTOR_PREFIX + "strata-client.js": StaticFile("strata-client.js",
                                                      "text/javascript; charset=utf-8"),
}


def is_inspector_path(path: str) -> bool:
    """Whether a request target belongs to the inspector (``/inspector`` or below it)."""
    target = urlsplit(path).path
    return target == INSPECTOR_PATH or target.startswith(INSPECTOR_PREFIX)


def _headers(content_type: str, length: int, extra: tuple[tuple[str, str], ...] = ()) -> Headers:
    return Headers([
        ("Date", email.utils.formatdate(usegmt=True)),
        ("Connection", "close"),
        ("Content-Type", content_type),
        ("Content-Length", str(length)),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
        ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
        ("Cross-Origin-Resource-Policy", "same-origin"),
        *extra,
    ])


def _text(status: HTTPStatus, text: str, extra: tuple[tuple[str, str], ...] = ()) -> Response:
    body = text.encode()
    return Response(status.value, status.phrase, _headers("text/plain; charset=utf-8", len(body), extra),
                    body)


def inspector_response(path: str, root: Path = STATIC_ROOT, method: str = "GET") -> Response:
    """The answer to ``method path`` for a path where :func:`is_inspector_path` holds.

    ``/inspector`` redirects to ``/inspector/`` so that the page's relative
    imports resolve under the prefix (a browser keeps the ``#fragment``
    across the redirect). A query string is ignored; an unknown name is 404.
    ``HEAD`` answers what ``GET`` would without the body; another method is 405.
    """
    if method not in ALLOWED_METHODS:
        return _text(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed\n",
                     (("Allow", ", ".join(ALLOWED_METHODS)),))
    response = _get(path, root)
    if method == "HEAD":  # the same headers, Content-Length included; nothing after them
        return Response(response.status_code, response.reason_phrase, response.headers, b"")
    return response


def _get(path: str, root: Path) -> Response:
    target = urlsplit(path).path
    if target == INSPECTOR_PATH:
        return _text(HTTPStatus.PERMANENT_REDIRECT, "see /inspector/\n",
                     (("Location", INSPECTOR_PREFIX),))
    entry = INSPECTOR_FILES.get(target)
    if entry is None:
        return _text(HTTPStatus.NOT_FOUND, "not found\n")
    try:
        body = (root / entry.name).read_bytes()
    except OSError:
        return _text(HTTPStatus.NOT_FOUND, "not found\n")
    return Response(HTTPStatus.OK.value, HTTPStatus.OK.phrase, _headers(entry.content_type, len(body)), body)
