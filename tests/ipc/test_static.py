"""The inspector's static files: an allowlist of four names, strict headers, no traversal."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipc.static import (
    CONTENT_SECURITY_POLICY,
    INSPECTOR_FILES,
    STATIC_ROOT,
    inspector_response,
    is_inspector_path,
)


def test_static_root_is_the_repositorys_renderer_stub() -> None:
    """The files are found beside the ipc package, in renderer-stub/ at the repository root."""
    assert Path(__file__).resolve().parents[2] / "renderer-stub" == STATIC_ROOT
    for entry in INSPECTOR_FILES.values():
        assert (STATIC_ROOT / entry.name).is_file(), entry.name


@pytest.mark.parametrize(("path", "name", "kind"), [
    ("/inspector/", "inspector.html", "text/html; charset=utf-8"),
    ("/inspector/inspector.js", "inspector.js", "text/javascript; charset=utf-8"),
    ("/inspector/inspector.css", "inspector.css", "text/css; charset=utf-8"),
    ("/inspector/strata-client.js", "strata-client.js", "text/javascript; charset=utf-8"),
    ("/inspector/?token=ignored", "inspector.html", "text/html; charset=utf-8"),
])
def test_allowlisted_files_are_served_with_strict_headers(path: str, name: str, kind: str) -> None:
    """Each allowed file comes back whole with its type, no caching, nosniff and the CSP."""
    response = inspector_response(path)
    assert response.status_code == 200
    assert response.body == (STATIC_ROOT / name).read_bytes()
    headers = response.headers
    assert headers["Content-Type"] == kind
    assert headers["Content-Length"] == str(len(response.body))
    assert headers["Cache-Control"] == "no-store"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert headers["Connection"] == "close"


def test_csp_allows_only_own_scripts_and_loopback_websockets() -> None:
    """No inline or foreign script, style or connection; framing and forms are off."""
    directives = dict(d.strip().split(" ", 1) for d in CONTENT_SECURITY_POLICY.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["connect-src"] == "'self' ws://127.0.0.1:* ws://localhost:*"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY


def test_bare_path_redirects_into_the_folder() -> None:
    """/inspector redirects to /inspector/ so relative imports resolve under the prefix."""
    response = inspector_response("/inspector")
    assert response.status_code == 308
    assert response.headers["Location"] == "/inspector/"


@pytest.mark.parametrize("path", [
    "/inspector/../ipc/server.py",
    "/inspector/..%2fpyproject.toml",
    "/inspector/%2e%2e/README.md",
    "/inspector//etc/passwd",
    "/inspector/inspector.html",
    "/inspector/client-test.html",
    "/inspector/package.json",
    "/inspector/node_modules/x.js",
    "/inspector/inspector.js/",
    "/inspector/INSPECTOR.JS",
])
def test_anything_else_is_404(path: str) -> None:
    """Only exact allowlisted names are served; nothing is joined onto a folder."""
    response = inspector_response(path)
    assert response.status_code == 404
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_missing_file_is_404(tmp_path: Path) -> None:
    """An install without the page files answers 404, not an error."""
    assert inspector_response("/inspector/inspector.js", root=tmp_path).status_code == 404


@pytest.mark.parametrize(("path", "expected"), [
    ("/inspector", True),
    ("/inspector/", True),
    ("/inspector/x", True),
    ("/inspector?token=x", True),
    ("/", False),
    ("/?token=x", False),
    ("/inspectorx", False),
    ("/x/inspector", False),
])
def test_inspector_paths(path: str, expected: bool) -> None:
    """Only /inspector and paths below it are the inspector's; the websocket keeps /."""
    assert is_inspector_path(path) is expected
