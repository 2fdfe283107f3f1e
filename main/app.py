"""The composition root: builds every service and wires it into the server.

What the ready line needs (the data dir claimed, the system channel, the socket) is built here
(:mod:`main.startup`); right after it, on worker threads while the event loop answers, the stores
open (:mod:`main.stores`) and the other channels and their services load (:mod:`main.wiring`).
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import structlog

from ipc.auth import origin_patterns
from ipc.channels.system import Limits, TokenizerDescription, register_system
from ipc.completions import ClientCompletions
from ipc.dispatch import Dispatcher
from ipc.errors import ShuttingDown
from ipc.registry import Registry
from ipc.server import TransportLimits, WebSocketServer
from ipc.session import SessionLimits
from main.config import Config
from main.lifecycle import StopSignal
from main.memory import fix_mmap_threshold, limit_arenas, space_full_collections
from main.startup import Startup, begin
from main.version import NAME, VERSION
from services.tokenizer import Tokenizer
from services.tokenizer.registry import TokenizerRegistry

if TYPE_CHECKING:
    from main.stores import Services

_log = structlog.get_logger("main")

Announce = Callable[[dict[str, Any]], None]


def transport_limits(config: Config) -> TransportLimits:
    return TransportLimits(
        max_frame_bytes=config.max_frame_bytes,
        max_connections=config.max_connections,
        ping_interval=config.ping_interval,
        ping_timeout=config.ping_timeout,
        session=SessionLimits(max_in_flight=config.max_in_flight, max_batch=config.max_batch),
    )


@dataclass(frozen=True)
class Basics:
    """What the system channel shares with the others: the clients that answer completions, and
    the projects' own tokenizers (system:info lists those that failed to load)."""

    completions: ClientCompletions
    tokenizers: TokenizerRegistry


def register_basics(registry: Registry, config: Config, tokenizer: Tokenizer,
                    connections: Callable[[], int],
                    embedding: Callable[[], Awaitable[Mapping[str, str]]]) -> Basics:
    """The system channel (system:*, rpc.discover, $/cancelRequest): served from the ready line on.
    ``embedding`` describes the retrieval encoder, once the stores have opened."""
    info = tokenizer.info
    # Projects' own tokenizers: system:info lists those that did not load.
    basics = Basics(ClientCompletions(config.completion_timeout),
                    TokenizerRegistry(config.tokenizer_encoding))
    register_system(
        registry,
        name=NAME,
        version=VERSION,
        tokenizer=TokenizerDescription(encoding=info.encoding, source=info.source, exact=info.exact),
        limits=Limits(max_frame_bytes=config.max_frame_bytes, max_in_flight=config.max_in_flight,
                      max_batch=config.max_batch, max_connections=config.max_connections),
        connections=connections,
        completions=basics.completions,
        tokenizer_problems=basics.tokenizers.problems,
        embedding=embedding,
    )
    return basics


async def load_methods(registry: Registry, config: Config, services: Services, basics: Basics) -> None:
    """Import the other channels and their services on a worker thread (the event loop answers
    meanwhile), then register them; calls to them wait until then (:meth:`Registry.completed`)."""
    try:
        register = await asyncio.to_thread(_import_wiring)
        register(registry, config, services, basics)
    finally:
        registry.complete()


def _import_wiring() -> Callable[[Registry, Config, Services, Basics], None]:
    from main.wiring import register_services

    return register_services


def _open_stores(config: Config, startup: Startup) -> Services:
    from main.stores import open_services  # SQLAlchemy and the services on it: after the ready line

    return open_services(config, startup)


async def _open(config: Config, startup: Startup, opened: asyncio.Future[Services]) -> Services:
    """The stores, opened on a worker thread; ``opened`` tells those waiting for them."""
    try:
        services = await asyncio.to_thread(_open_stores, config, startup)
    except BaseException:
        # The process ends with the reason (main/cli.py); a call waiting for the stores is told so.
        opened.set_exception(ShuttingDown())
        opened.exception()  # marked retrieved: with no one waiting, asyncio would warn
        raise
    opened.set_result(services)
    return services


async def _described(opened: asyncio.Future[Services]) -> Mapping[str, str]:
    # system:info's encoder is the one the stored index records: it waits for the stores only.
    services = await asyncio.shield(opened)
    return await services.retrieval.describe_embedding()


def ready_message(config: Config, port: int) -> dict[str, Any]:
    host = f"[{config.host}]" if ":" in config.host else config.host
    message: dict[str, Any] = {"event": "ready", "url": f"ws://{host}:{port}/",
                               "token": config.token, "pid": os.getpid(), "version": VERSION}
    if config.debug:
        message["inspectorToken"] = config.inspector_token
    return message


async def serve(config: Config, announce: Announce) -> None:
    """Run until a stop signal; close everything in order on the way out."""
    limit_arenas()
    fix_mmap_threshold()
    space_full_collections()
    stop = StopSignal()
    await stop.install(config.watch_stdin)
    startup = await asyncio.to_thread(begin, config)
    opened: asyncio.Future[Services] = asyncio.get_running_loop().create_future()
    services: Services | None = None
    try:
        holder: list[WebSocketServer] = []
        registry = Registry()
        basics = register_basics(registry, config, startup.tokenizer,
                                 lambda: holder[0].connection_count, partial(_described, opened))
        registry.expect_more()
        server = WebSocketServer(
            Dispatcher(registry, trace=config.log_level == "debug"),
            token=config.token,
            inspector_token=config.inspector_token,
            origin_patterns=origin_patterns(config.allowed_origins, config.allow_file_origins),
            limits=transport_limits(config),
            debug=config.debug,
        )
        holder.append(server)
        port = await server.start(config.host, config.port)
        try:
            _log.info("main.ready", port=port, debug=config.debug, tokenizer=startup.tokenizer.info.source)
            announce(ready_message(config, port))
            services = await _open(config, startup, opened)
            services.retrieval.progress = partial(server.publish, "progress", "$/progress")
            await load_methods(registry, config, services, basics)
            # Everything made so far (imports, stores, the registry) lives as long as the process: keep
            # it out of the collector's full passes, which otherwise stall a request for 50-80 ms.
            gc.freeze()
            _log.info("main.loaded", methods=len(registry))
            reason = await stop.wait()
            _log.info("main.stopping", reason=reason)
        finally:
            await server.shutdown(config.shutdown_grace)
    finally:
        stop.uninstall()
        if services is not None:
            await services.aclose()
        else:
            startup.close()
    _log.info("main.stopped")
