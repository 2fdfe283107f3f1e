"""Settings of a run: defaults, STRATA_* variables, validation, derived paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy.engine import make_url

from main.config import Config, StdinWatch, default_data_dir


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No STRATA_* variable leaks in from the machine; the data home is a tmp folder."""
    for name in list(os.environ):
        if name.startswith("STRATA_"):
            monkeypatch.delenv(name)
    data_home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    return data_home


def _error_locs(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple[str | int, ...]]:
    return [tuple(err["loc"]) for err in exc.value.errors()]


def test_defaults(clean_env: Path) -> None:
    """With nothing set: loopback, a free port, no debug, info logs, data in XDG_DATA_HOME, no
    allow-list of project roots, and no running as root."""
    config = Config()
    assert config.model_dump(exclude={"token", "inspector_token"}) == {
        "data_dir": clean_env / "strata",
        "host": "127.0.0.1",
        "port": 0,
        "debug": False,
        "database_url": None,
        "chroma_url": None,
        "embedding": "multilingual-e5-small",
        "index_debounce": 0.3,
        "index_idle_minutes": 10.0,
        "max_open_indexes": 8,
        "log_level": "info",
        "allowed_origins": (),
        "allow_file_origins": False,
        "watch_stdin": StdinWatch.AUTO,
        "tokenizer_encoding": "cl100k_base",
        "max_frame_bytes": 4 * 2**20,
        "max_in_flight": 64,
        "max_batch": 64,
        "max_connections": 32,
        "ping_interval": 20.0,
        "ping_timeout": 20.0,
        "shutdown_grace": 5.0,
        "completion_timeout": 10.0,
        "chat_summary_threshold": 12,
        "chat_summary_chars": 600,
        "chat_idle_minutes": 30.0,
        "chat_max_sessions": 1000,
        "project_roots": (),
        "allow_root": False,
    }


def test_tokens_are_random_per_build_and_distinct() -> None:
    """Each build draws fresh client and inspector tokens, long and different from each other."""
    first, second = Config(), Config()
    tokens = {first.token, first.inspector_token, second.token, second.inspector_token}
    assert len(tokens) == 4
    assert all(len(token) >= 32 for token in tokens)


def test_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """STRATA_<FIELD> sets each field, converted to its type."""
    monkeypatch.setenv("STRATA_PORT", "8123")
    monkeypatch.setenv("STRATA_HOST", "::1")
    monkeypatch.setenv("STRATA_DEBUG", "true")
    monkeypatch.setenv("STRATA_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("STRATA_TOKEN", "t" * 16)
    monkeypatch.setenv("STRATA_LOG_LEVEL", "WARNING")
    monkeypatch.setenv("STRATA_WATCH_STDIN", "off")
    monkeypatch.setenv("STRATA_SHUTDOWN_GRACE", "0.5")
    config = Config()
    assert (config.port, config.host, config.debug, config.data_dir, config.token,
            config.log_level, config.watch_stdin, config.shutdown_grace) == (
        8123, "::1", True, tmp_path / "d", "t" * 16, "warning", StdinWatch.OFF, 0.5)


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("yes", True), ("0", False),
                                               ("false", False)])
def test_debug_flag_from_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool,
) -> None:
    """STRATA_DEBUG accepts the usual spellings of true and false."""
    monkeypatch.setenv("STRATA_DEBUG", raw)
    assert Config().debug is expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://localhost:5173", ("http://localhost:5173",)),
        ("http://a.test, https://b.test", ("http://a.test", "https://b.test")),
        (" http://a.test ,, ,https://b.test,", ("http://a.test", "https://b.test")),
        ("", ()),
    ],
)
def test_allowed_origins_are_comma_separated(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: tuple[str, ...],
) -> None:
    """STRATA_ALLOWED_ORIGINS is split on commas, trimmed, and empty parts dropped."""
    monkeypatch.setenv("STRATA_ALLOWED_ORIGINS", raw)
    assert Config().allowed_origins == expected


def test_explicit_values_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values passed to Config (the CLI's) win over STRATA_* variables."""
    monkeypatch.setenv("STRATA_PORT", "8000")
    monkeypatch.setenv("STRATA_HOST", "127.0.0.2")
    config = Config(port=9000, allowed_origins=["http://x.test"])
    assert (config.port, config.host, config.allowed_origins) == (
        9000, "127.0.0.2", ("http://x.test",))


@pytest.mark.parametrize(
    ("kwargs", "loc"),
    [
        ({"port": -1}, ("port",)),
        ({"port": 65536}, ("port",)),
        ({"token": "short"}, ("token",)),
        ({"inspector_token": "x" * 15}, ("inspector_token",)),
        ({"log_level": "verbose"}, ("log_level",)),
        ({"max_frame_bytes": 10}, ("max_frame_bytes",)),
        ({"ping_interval": 0}, ("ping_interval",)),
        ({"watch_stdin": "sometimes"}, ("watch_stdin",)),
        ({"no_such_setting": 1}, ("no_such_setting",)),
    ],
)
def test_invalid_values_are_rejected(kwargs: dict[str, object], loc: tuple[str, ...]) -> None:
    """Out-of-range, too short, unknown or misspelt settings fail validation on that field."""
    with pytest.raises(ValidationError) as exc:
        Config(**kwargs)  # type: ignore[arg-type]
    assert _error_locs(exc) == [loc]


def test_log_level_message_names_the_choices() -> None:
    """A bad log level explains which levels exist."""
    with pytest.raises(ValidationError) as exc:
        Config(log_level="loud")
    assert exc.value.errors()[0]["msg"] == (
        "Value error, log level must be debug, info, warning or error")


def test_invalid_environment_variable_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad STRATA_* value fails validation just like a bad argument."""
    monkeypatch.setenv("STRATA_PORT", "70000")
    monkeypatch.setenv("STRATA_DEBUG", "perhaps")
    with pytest.raises(ValidationError) as exc:
        Config()
    assert sorted(_error_locs(exc)) == [("debug",), ("port",)]


def test_config_is_frozen() -> None:
    """A built Config cannot be changed."""
    config = Config()
    with pytest.raises(ValidationError) as exc:
        setattr(config, "port", 1)  # noqa: B010 - mypy rightly refuses the plain assignment
    assert exc.value.errors()[0]["type"] == "frozen_instance"


def test_derived_paths_live_in_the_data_dir(tmp_path: Path) -> None:
    """The SQLite file, the Chroma folder and the log file all sit under data_dir."""
    config = Config(data_dir=tmp_path / "data")
    url = make_url(config.resolved_database_url)
    assert (url.get_backend_name(), url.database) == ("sqlite", str(tmp_path / "data" / "strata.db"))
    assert config.chroma_path == tmp_path / "data" / "chroma"
    assert config.log_path == tmp_path / "data" / "logs" / "strata.log"


def test_explicit_database_url_wins(tmp_path: Path) -> None:
    """A configured database URL is used as given, not the default file."""
    config = Config(data_dir=tmp_path, database_url="postgresql://db.test/strata")
    assert config.resolved_database_url == "postgresql://db.test/strata"


def test_default_data_dir_without_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without XDG_DATA_HOME the data dir is ~/.local/share/strata."""
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_data_dir() == tmp_path / ".local" / "share" / "strata"
    assert Config().data_dir == tmp_path / ".local" / "share" / "strata"


def test_tokens_stay_out_of_repr(tmp_path: Path) -> None:
    """Printing or logging a Config never shows the tokens."""
    config = Config(data_dir=tmp_path, token="client-token-0123456789",
                    inspector_token="inspector-token-0123456789")
    assert "client-token" not in repr(config)
    assert "inspector-token" not in repr(config)


def test_tokens_must_differ(tmp_path: Path) -> None:
    """The inspector token cannot equal the client token, or every client would be an inspector."""
    with pytest.raises(ValidationError, match="must differ"):
        Config(data_dir=tmp_path, token="same-token-0123456789", inspector_token="same-token-0123456789")


@pytest.mark.parametrize("spec", ["", "bert", "openai:", "openai:http://h", "sentence-transformers:",
                                  "openai:ftp://h#m"])
def test_unknown_embeddings_are_refused(tmp_path: Path, spec: str) -> None:
    """--embedding accepts only the documented forms, and the message lists them."""
    with pytest.raises(ValidationError, match="use-multilingual"):
        Config(data_dir=tmp_path, embedding=spec)


@pytest.mark.parametrize("spec", ["multilingual-e5-small", "use-multilingual", "chroma-default",
                                  "sentence-transformers:m",
                                  "openai:http://127.0.0.1:8080/v1#text-embedding-3-small"])
def test_known_embeddings_are_accepted(tmp_path: Path, spec: str) -> None:
    """Each documented embedding form is accepted as given."""
    assert Config(data_dir=tmp_path, embedding=spec).embedding == spec


@pytest.mark.parametrize("url", ["chroma.host:8000", "ftp://h:1", "localhost"])
def test_chroma_url_needs_http(tmp_path: Path, url: str) -> None:
    """A Chroma URL without http(s) is refused instead of silently meaning 127.0.0.1."""
    with pytest.raises(ValidationError, match="http"):
        Config(data_dir=tmp_path, chroma_url=url)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.2", "localhost", "example.com"])
def test_host_must_be_a_loopback_address(host: str) -> None:
    """Binding anything but a loopback address is refused: the Host check admits loopback only."""
    with pytest.raises(ValidationError, match="loopback"):
        Config(host=host)


def test_ipv6_loopback_is_accepted() -> None:
    """::1 (with or without brackets) is a loopback address."""
    assert Config(host="[::1]").host == "::1"
