"""structlog set up for JSON lines on stderr and in a rotating file."""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import sys
from pathlib import Path
from typing import Any

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


class RotatingJsonFile(logging.handlers.RotatingFileHandler):
    """A rotating file that formats each record once.

    The standard handler formats a record twice, once to decide whether to roll over and once
    to write it, and checks that the file is a regular one at every record; an assembly logs a
    few lines, so that was a tenth of a millisecond each time. Here the line is formatted once,
    the size is the stream's own position, and the file kind is checked when it is opened.
    """

    def _open(self) -> Any:
        stream = super()._open()
        self._regular = os.path.isfile(self.baseFilename)  # never roll over /dev/null and the like
        return stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.write_line(self.format(record))
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def write_line(self, line: str) -> None:
        """Write one rendered line (the caller holds the handler's lock)."""
        line += self.terminator
        if self.stream is None:
            self.stream = self._open()
        if (self.maxBytes > 0 and self._regular
                and self.stream.tell() + len(line.encode("utf-8", "replace")) >= self.maxBytes):
            self.doRollover()
            if self.stream is None:
                self.stream = self._open()
        self.stream.write(line)
        self.stream.flush()


class JsonStream(logging.StreamHandler):  # type: ignore[type-arg]
    """stderr, taking lines structlog rendered as well as records."""

    def write_line(self, line: str) -> None:
        """Write one rendered line (the caller holds the handler's lock)."""
        self.stream.write(line + self.terminator)
        self.flush()


class JsonLines:
    """structlog's logger: writes the line its processors rendered to the root logger's line
    handlers (stderr and the rotating file), under each handler's lock.

    The way through the standard library made each event a log record, copied it to format it and
    looked up the caller's frame: about 60 microseconds a line, and an assembly logs two or three.
    Records from other libraries still go through the handlers as records."""

    def __init__(self, *_names: object) -> None:
        pass

    def write(self, line: str) -> None:
        for handler in logging.getLogger().handlers:
            write_line = getattr(handler, "write_line", None)
            if write_line is None:
                continue
            handler.acquire()
            try:
                with contextlib.suppress(Exception):  # a log line never fails the work that logs it
                    write_line(line)
            finally:
                handler.release()

    debug = info = msg = warning = warn = error = critical = exception = fatal = log = write


class OnceFormatter(structlog.stdlib.ProcessorFormatter):
    """Renders a record of another library once for all the handlers that write it (stderr and the
    file get the very same line); Strata's own events never become records (:class:`JsonLines`)."""

    def format(self, record: logging.LogRecord) -> str:
        line = record.__dict__.get("_strata_line")
        if not isinstance(line, str):
            line = super().format(record)
            record.__dict__["_strata_line"] = line
        return line


def configure_logging(level: str, log_file: Path | None) -> None:
    """Route structlog (and stdlib logging) to stderr and ``log_file`` as JSON lines."""
    handlers: list[logging.Handler] = [JsonStream(sys.stderr)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(RotatingJsonFile(log_file, maxBytes=5 * 2**20, backupCount=3, encoding="utf-8"))
    # Records from other libraries' stdlib loggers get the same level and
    # timestamp keys and are rendered as JSON too, so every line parses.
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    formatter = OnceFormatter(
        foreign_pre_chain=[structlog.processors.add_log_level, timestamper,
                           structlog.processors.format_exc_info],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.JSONRenderer(ensure_ascii=False)],
    )
    for handler in handlers:
        handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    for handler in handlers:
        root.addHandler(handler)
    numeric = _LEVELS[level]
    root.setLevel(numeric)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            timestamper,
            structlog.processors.JSONRenderer(ensure_ascii=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=JsonLines,
        cache_logger_on_first_use=True,
    )


def shutdown_logging() -> None:
    logging.shutdown()
