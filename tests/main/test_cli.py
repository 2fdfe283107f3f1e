"""The command line: flags, their precedence over STRATA_* variables, clean failures.

No test here starts the server; the process lifecycle is tested end to end elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from main.cli import config_from_args, parser, run
from main.config import StdinWatch
from main.version import VERSION
from tests.support.process import AS_ROOT

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No STRATA_* variable leaks in from the machine; data goes to a tmp folder."""
    for name in list(os.environ):
        if name.startswith("STRATA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def test_serve_accepts_every_flag(tmp_path: Path) -> None:
    """``serve`` parses each flag to its typed value; --allowed-origin and --project-root repeat."""
    args = parser().parse_args([
        "serve", "--data-dir", str(tmp_path), "--host", "::1", "--port", "8123",
        "--token", "t" * 16, "--inspector-token", "i" * 16,
        "--database-url", "sqlite://", "--chroma-url", "http://chroma.test:8000",
        "--embedding", "sentence-transformers:local-model", "--index-debounce", "0.5",
        "--index-idle-minutes", "2.5", "--max-open-indexes", "3",
        "--log-level", "debug", "--allowed-origin", "http://a.test",
        "--allowed-origin", "http://b.test", "--watch-stdin", "off",
        "--tokenizer-encoding", "o200k_base", "--max-frame-bytes", "4096",
        "--max-in-flight", "8", "--max-connections", "4", "--shutdown-grace", "1.5",
        "--completion-timeout", "2.5", "--chat-summary-threshold", "20", "--chat-summary-chars", "450",
        "--chat-idle-minutes", "5", "--chat-max-sessions", "10",
        "--project-root", "/srv/novels", "--project-root", "/mnt/drafts",
        "--debug", "--allow-file-origins", "--allow-root",
    ])
    assert vars(args) == {
        "command": "serve", "data_dir": str(tmp_path), "host": "::1", "port": 8123,
        "token": "t" * 16, "inspector_token": "i" * 16, "database_url": "sqlite://",
        "chroma_url": "http://chroma.test:8000", "embedding": "sentence-transformers:local-model",
        "index_debounce": 0.5, "index_idle_minutes": 2.5, "max_open_indexes": 3, "log_level": "debug",
        "allowed_origins": ["http://a.test", "http://b.test"], "watch_stdin": "off",
        "tokenizer_encoding": "o200k_base", "max_frame_bytes": 4096, "max_in_flight": 8,
        "max_connections": 4, "shutdown_grace": 1.5, "debug": True, "allow_file_origins": True,
        "completion_timeout": 2.5, "chat_summary_threshold": 20, "chat_summary_chars": 450,
        "chat_idle_minutes": 5.0, "chat_max_sessions": 10,
        "project_roots": ["/srv/novels", "/mnt/drafts"], "allow_root": True,
    }


def test_unset_flags_are_none() -> None:
    """Flags not given stay None, so they do not mask STRATA_* variables or defaults."""
    args = vars(parser().parse_args(["serve"]))
    assert args.pop("command") == "serve"
    assert set(args.values()) == {None}


@pytest.mark.parametrize(
    "argv",
    [[], ["start"], ["serve", "--port", "eighty"], ["serve", "--log-level", "loud"],
     ["serve", "--watch-stdin", "maybe"], ["serve", "--nope"]],
)
def test_malformed_command_lines_exit_with_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str],
) -> None:
    """A missing command, unknown flag or badly typed value exits 2 with argparse's usage."""
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("usage: strata")


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the build's version and exits 0."""
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"{VERSION}\n"


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag beats its STRATA_* variable; variables without a flag still apply."""
    monkeypatch.setenv("STRATA_PORT", "1111")
    monkeypatch.setenv("STRATA_HOST", "127.0.0.2")
    monkeypatch.setenv("STRATA_ALLOWED_ORIGINS", "http://env.test")
    monkeypatch.setenv("STRATA_WATCH_STDIN", "on")
    monkeypatch.setenv("STRATA_DEBUG", "1")
    config = config_from_args(parser().parse_args(
        ["serve", "--port", "2222", "--allowed-origin", "http://flag.test"]))
    assert (config.port, config.host, config.allowed_origins, config.watch_stdin,
            config.debug) == (2222, "127.0.0.2", ("http://flag.test",), StdinWatch.ON, True)


def test_flags_reach_the_config(tmp_path: Path) -> None:
    """Each serve flag lands on the Config field of the same name."""
    config = config_from_args(parser().parse_args([
        "serve", "--data-dir", str(tmp_path), "--token", "t" * 16, "--log-level", "error",
        "--debug", "--shutdown-grace", "0", "--max-in-flight", "3"]))
    assert (config.data_dir, config.token, config.log_level, config.debug,
            config.shutdown_grace, config.max_in_flight) == (
        tmp_path, "t" * 16, "error", True, 0.0, 3)


def test_invalid_flag_value_exits_2_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    """An out-of-range port returns 2 and says which setting is wrong, without a traceback."""
    assert run(["serve", "--port", "70000"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "strata: invalid setting port: Input should be less than or equal to 65535\n"


def test_short_token_is_reported_without_echoing_it(capsys: pytest.CaptureFixture[str]) -> None:
    """A too-short token is named as the problem, but its value is never printed."""
    assert run(["serve", "--token", "sekret-value"]) == 2
    err = capsys.readouterr().err
    assert err == "strata: invalid setting token: String should have at least 16 characters\n"
    assert "sekret-value" not in err


def test_invalid_environment_exits_2_with_one_line_per_problem(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """Bad STRATA_* values are reported the same way, one line for each."""
    monkeypatch.setenv("STRATA_LOG_LEVEL", "loud")
    monkeypatch.setenv("STRATA_MAX_IN_FLIGHT", "0")
    assert run(["serve"]) == 2
    lines = sorted(capsys.readouterr().err.splitlines())
    assert lines == [
        "strata: invalid setting log_level: Value error, log level must be debug, info, "
        "warning or error",
        "strata: invalid setting max_in_flight: Input should be greater than or equal to 1",
    ]


def test_unusable_data_dir_fails_cleanly(tmp_path: Path) -> None:
    """A data dir that cannot hold the log folder exits 1 with a message, not a traceback.

    Run as a child process because run() rewires the real stdout; the server is
    never reached (the failure is before it, and stdin is closed besides).
    """
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    done = subprocess.run(
        [sys.executable, "-m", "main", "serve", "--data-dir", str(not_a_dir),
         "--watch-stdin", "on", *AS_ROOT],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=60, check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == "strata: cannot start: Not a directory"
