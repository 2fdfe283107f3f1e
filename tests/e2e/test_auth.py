"""Handshake security over a real socket: token, Host and Origin checks."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.support.client import RpcClient
from tests.support.handshake import handshake_status
from tests.support.inproc import INSPECTOR_TOKEN, TOKEN, InProcServer, inproc_server

BEARER = {"Authorization": f"Bearer {TOKEN}"}


async def test_bearer_token_opens(server: InProcServer) -> None:
    """The right token in the Authorization header opens a connection."""
    assert await handshake_status(server.port, headers=BEARER) == 101


async def test_token_in_query_opens(server: InProcServer) -> None:
    """Browsers, which cannot set headers, may pass ?token=."""
    rpc = RpcClient(await connect(f"{server.url}?token={TOKEN}", compression=None))
    assert (await rpc.call("system:info"))["name"] == "strata"
    await rpc.close()


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
    ],
)
async def test_missing_or_wrong_token_is_401(server: InProcServer, headers: dict[str, str]) -> None:
    """Without the exact token the handshake ends in 401, before any JSON-RPC."""
    assert await handshake_status(server.port, headers=headers) == 401


async def test_wrong_query_token_is_401(server: InProcServer) -> None:
    """A wrong ?token= is refused like a wrong header."""
    assert await handshake_status(server.port, path="/?token=nope") == 401


async def test_client_library_sees_401(server: InProcServer) -> None:
    """A websocket client gets a clear HTTP 401, not a half-open socket."""
    with pytest.raises(InvalidStatus) as refused:
        await connect(server.url)
    assert refused.value.response.status_code == 401


@pytest.mark.parametrize(
    "origin",
    [
        "app://strata",
        "http://127.0.0.1:5173",
        "https://localhost:8443",
        "http://localhost",
        "http://[::1]:3000",
    ],
)
async def test_allowed_origins(server: InProcServer, origin: str) -> None:
    """The app's origin and loopback web origins on any port are accepted."""
    assert await handshake_status(server.port, headers={**BEARER, "Origin": origin}) == 101


@pytest.mark.parametrize(
    "origin",
    [
        "https://localhost.evil.com",
        "http://127.0.0.1.evil.com",
        "http://localhost:80.evil.com",
        "http://evil.com/http://localhost",
        "app://x.evil",
        "app://strata.evil",
        "app://strataX",
        "https://evil.com",
        "file://",
        "null",
        "http://localhost:99999999",
    ],
)
async def test_lookalike_origins_are_403(server: InProcServer, origin: str) -> None:
    """Origins that only start like an allowed one are refused with 403, even with the token."""
    assert await handshake_status(server.port, headers={**BEARER, "Origin": origin}) == 403


async def test_file_origins_when_configured() -> None:
    """file:// and null are accepted only when configured."""
    async with inproc_server(allow_file=True) as running:
        for origin in ("file://", "null"):
            headers = {**BEARER, "Origin": origin}
            assert await handshake_status(running.port, headers=headers) == 101


async def test_extra_origin_is_exact() -> None:
    """A configured extra origin matches exactly, not as a pattern or prefix."""
    async with inproc_server(extra=("https://app.example.org",)) as running:
        ok = {**BEARER, "Origin": "https://app.example.org"}
        assert await handshake_status(running.port, headers=ok) == 101
        for origin in ("https://app.example.org.evil", "https://appXexample.org"):
            bad = {**BEARER, "Origin": origin}
            assert await handshake_status(running.port, headers=bad) == 403


@pytest.mark.parametrize(
    "host",
    ["evil.com", "evil.com:{port}", "127.0.0.1.evil.com:{port}", "localhost:1", "localhost.:{port}",
     "192.168.1.2:{port}", ""],
)
async def test_non_loopback_host_is_refused(server: InProcServer, host: str) -> None:
    """A Host header that is not loopback with our port (DNS rebinding) is refused."""
    status = await handshake_status(server.port, headers=BEARER, host=host.format(port=server.port))
    assert status == 403


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}",
                                  "[::1]:{port}"])
async def test_loopback_hosts_are_accepted(server: InProcServer, host: str) -> None:
    """Every loopback spelling with our port is accepted."""
    status = await handshake_status(server.port, headers=BEARER, host=host.format(port=server.port))
    assert status == 101


async def test_other_paths_are_404(server: InProcServer) -> None:
    """Only / speaks JSON-RPC."""
    assert await handshake_status(server.port, path="/other", headers=BEARER) == 404


async def test_inspector_token_only_in_debug() -> None:
    """The inspector token authenticates only when the server runs in debug mode."""
    headers = {"Authorization": f"Bearer {INSPECTOR_TOKEN}"}
    async with inproc_server(debug=True) as running:
        assert await handshake_status(running.port, headers=headers) == 101
    async with inproc_server(debug=False) as running:
        assert await handshake_status(running.port, headers=headers) == 401
