"""Logging: JSON lines on stderr and in a rotating file, filtered by level."""

from __future__ import annotations

import json
import logging
import logging.handlers
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import structlog

from main.logs import JsonStream, RotatingJsonFile, configure_logging


def _is_pytests(handler: logging.Handler) -> bool:
    return type(handler).__module__.startswith("_pytest")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Put the root logger and structlog back as they were, whatever the test did.

    configure_logging replaces the root handlers; pytest's own capture handlers
    come and go per test phase, so only foreign handlers are restored.
    """
    root = logging.getLogger()
    handlers = [h for h in root.handlers if not _is_pytests(h)]
    level = root.level
    config = structlog.get_config()
    yield
    for handler in list(root.handlers):
        if not _is_pytests(handler) and handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()
    structlog.configure(**config)


def _flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def _timestamp(record: dict[str, Any]) -> datetime:
    stamp = datetime.fromisoformat(record["timestamp"])
    assert stamp.tzinfo is not None
    return stamp


def _summary(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["event"], r["level"]) for r in records]


def test_json_lines_go_to_stderr_and_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """At info level each event is one JSON line with event, level and a UTC timestamp,
    written to stderr and to the log file (whose folder is created); debug is dropped."""
    log_file = tmp_path / "logs" / "strata.log"
    before = datetime.now(UTC)
    configure_logging("info", log_file)
    log = structlog.get_logger("test")
    log.debug("test.debug", n=0)
    log.info("test.info", n=1, conn="c1")
    log.warning("test.warning", n=2)
    log.error("test.error", n=3)
    _flush()

    captured = capsys.readouterr()
    assert captured.out == ""
    stderr = _json_lines(captured.err)
    in_file = _json_lines(log_file.read_text(encoding="utf-8"))
    assert stderr == in_file
    assert _summary(stderr) == [("test.info", "info"), ("test.warning", "warning"),
                                ("test.error", "error")]
    assert [(r["n"], sorted(r)) for r in stderr] == [
        (1, ["conn", "event", "level", "n", "timestamp"]),
        (2, ["event", "level", "n", "timestamp"]),
        (3, ["event", "level", "n", "timestamp"]),
    ]
    for record in stderr:
        assert before <= _timestamp(record) <= datetime.now(UTC)


def test_the_file_handler_rotates(tmp_path: Path) -> None:
    """The log file is a rotating handler (5 MiB, three backups), so it cannot grow forever."""
    configure_logging("info", tmp_path / "strata.log")
    rotating = [h for h in logging.getLogger().handlers
                if isinstance(h, logging.handlers.RotatingFileHandler)]
    assert [(h.baseFilename, h.maxBytes, h.backupCount) for h in rotating] == [
        (str(tmp_path / "strata.log"), 5 * 2**20, 3)]


def test_the_file_rolls_over_at_its_size_and_formats_each_record_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past maxBytes the file moves to .1 and a new one starts; every line is whole JSON, each
    record formatted once (the standard handler formats it a second time to measure it)."""
    handler = RotatingJsonFile(tmp_path / "strata.log", maxBytes=400, backupCount=2, encoding="utf-8")
    handler.setFormatter(logging.Formatter('{"n": %(message)s, "pad": "' + 'x' * 40 + '"}'))
    formatted: list[str] = []
    original = handler.format
    def counting(record: logging.LogRecord) -> str:
        formatted.append(record.msg)
        return original(record)

    monkeypatch.setattr(handler, "format", counting)
    for n in range(30):
        handler.handle(logging.LogRecord("t", logging.INFO, __file__, 1, str(n), None, None))
    handler.close()
    assert len(formatted) == 30
    rolled = tmp_path / "strata.log.1"
    assert rolled.exists()
    assert rolled.stat().st_size < 400
    lines = [json.loads(line)["n"] for path in (tmp_path / "strata.log.2", rolled, tmp_path / "strata.log")
             if path.exists() for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines == list(range(30 - len(lines), 30))


def test_debug_level_keeps_debug_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """At debug level the debug events are written too."""
    configure_logging("debug", None)
    log = structlog.get_logger("test")
    log.debug("test.debug")
    log.info("test.info")
    _flush()
    assert _summary(_json_lines(capsys.readouterr().err)) == [
        ("test.debug", "debug"), ("test.info", "info")]


def test_warning_level_drops_info(capsys: pytest.CaptureFixture[str]) -> None:
    """At warning level info and debug events are filtered out."""
    configure_logging("warning", None)
    log = structlog.get_logger("test")
    log.info("test.info")
    log.warning("test.warning")
    _flush()
    assert _summary(_json_lines(capsys.readouterr().err)) == [("test.warning", "warning")]


def test_stdlib_records_are_json_lines_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Libraries logging through the stdlib get the same JSON shape and the same level filter."""
    log_file = tmp_path / "strata.log"
    configure_logging("info", log_file)
    library = logging.getLogger("some.library")
    library.debug("hidden %s", "detail")
    library.info("listening on %s:%d", "127.0.0.1", 8080)
    library.warning("slow")
    _flush()
    stderr = _json_lines(capsys.readouterr().err)
    in_file = _json_lines(log_file.read_text(encoding="utf-8"))
    assert _summary(stderr) == [("listening on 127.0.0.1:8080", "info"), ("slow", "warning")]
    assert _summary(in_file) == _summary(stderr)
    assert all(sorted(r) == ["event", "level", "timestamp"] for r in stderr)
    for record in stderr:
        _timestamp(record)


def test_reconfiguring_replaces_the_handlers(capsys: pytest.CaptureFixture[str]) -> None:
    """Configuring twice does not duplicate output: each event is written once."""
    configure_logging("info", None)
    configure_logging("info", None)
    structlog.get_logger("test").info("test.once")
    _flush()
    assert _summary(_json_lines(capsys.readouterr().err)) == [("test.once", "info")]


def test_an_event_is_rendered_once_for_stderr_and_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Both handlers write the very same line, rendered once per event, not once per handler."""
    rendered: list[str] = []
    real = structlog.processors.JSONRenderer.__call__

    def counting(self: structlog.processors.JSONRenderer, logger: Any, name: str,
                 event: Any) -> str:
        line = real(self, logger, name, event)
        assert isinstance(line, str)
        rendered.append(line)
        return line

    monkeypatch.setattr(structlog.processors.JSONRenderer, "__call__", counting)
    log_file = tmp_path / "strata.log"
    configure_logging("info", log_file)
    log = structlog.get_logger("test")
    log.info("test.once", n=1)
    log.warning("test.twice", n=2)
    _flush()
    stderr = capsys.readouterr().err.splitlines()
    assert stderr == log_file.read_text(encoding="utf-8").splitlines() == rendered
    assert _summary(_json_lines("\n".join(stderr))) == [("test.once", "info"), ("test.twice", "warning")]


def test_a_failing_sink_fails_neither_the_caller_nor_the_other_sink(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """When stderr cannot be written (a closed pipe), the event still reaches the file, the call
    that logged it returns normally, and the handler's lock is free for the next line."""
    log_file = tmp_path / "strata.log"
    configure_logging("info", log_file)

    def broken(self: JsonStream, line: str) -> None:
        raise BrokenPipeError("stderr is gone")

    monkeypatch.setattr(JsonStream, "write_line", broken)
    structlog.get_logger("test").info("test.kept", n=1)
    monkeypatch.undo()
    structlog.get_logger("test").info("test.after", n=2)
    _flush()
    assert _summary(_json_lines(log_file.read_text(encoding="utf-8"))) == [
        ("test.kept", "info"), ("test.after", "info")]
    assert _summary(_json_lines(capsys.readouterr().err)) == [("test.after", "info")]
