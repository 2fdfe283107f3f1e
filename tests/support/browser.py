"""Real headless Chromium for browser tests, and a static server for the pages it loads.

Playwright cannot download browsers on this machine, so it drives Debian's
Chromium (``scripts/setup-browser.sh``) through ``executable_path``. Pages are
served over HTTP from 127.0.0.1 so that their Origin is a loopback web origin,
which the websocket server's default origin policy allows.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, async_playwright

CHROMIUM = os.environ.get("STRATA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class _StaticHandler(SimpleHTTPRequestHandler):
    """Serves files with module-friendly types, never cached, without logging."""

    extensions_map = {  # noqa: RUF012 - the base class declares it as a plain dict
        **SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".html": "text/html; charset=utf-8",
        ".json": "application/json",
    }

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1 (free port) from a thread; yield its base URL."""
    handler = partial(_StaticHandler, directory=str(folder))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="static-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        thread.join(timeout=5)
        httpd.server_close()


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """Launch headless Chromium from ``CHROMIUM`` and close it afterwards."""
    if not os.access(CHROMIUM, os.X_OK):
        raise RuntimeError(f"no Chromium at {CHROMIUM}: run scripts/setup-browser.sh "
                           "or set STRATA_CHROMIUM")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                   args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            await browser.close()
