"""Refusing to run as root without --allow-root, and the --project-root allow-list settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from main.cli import ROOT_REFUSAL, config_from_args, effective_uid, parser, root_refusal, run
from main.config import Config


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No STRATA_* variable leaks in from the machine; data goes to a tmp folder."""
    for name in list(os.environ):
        if name.startswith("STRATA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


@pytest.mark.parametrize(("euid", "allow_root", "refused"), [
    (0, False, True),
    (0, True, False),
    (1000, False, False),
    (1000, True, False),
    (None, False, False),  # no effective uid (Windows): nothing to refuse
])
def test_root_is_refused_unless_allowed(euid: int | None, allow_root: bool, refused: bool) -> None:
    """Effective uid 0 without --allow-root is refused with the message; any other user, or root
    with the flag, is not."""
    assert root_refusal(euid, allow_root) == (ROOT_REFUSAL if refused else None)


def test_the_message_says_why_and_how() -> None:
    """The refusal names the danger and both ways to proceed: another user, or --allow-root."""
    assert ROOT_REFUSAL.startswith("strata: refusing to run as root")
    assert "--allow-root" in ROOT_REFUSAL
    assert "STRATA_ALLOW_ROOT=1" in ROOT_REFUSAL


def test_the_effective_uid_is_the_processes() -> None:
    """effective_uid is os.geteuid() where there is one."""
    assert effective_uid() == os.geteuid()


def test_run_as_root_exits_1_before_touching_anything(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """run() as uid 0 without the flag prints the one message to stderr, nothing to stdout, exits 1
    and creates no data dir (the server is never started)."""
    data = tmp_path / "data"
    assert run(["serve", "--data-dir", str(data)], euid=lambda: 0) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", ROOT_REFUSAL + "\n")
    assert not data.exists()


def test_invalid_settings_are_reported_before_the_root_check(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad setting is exit 2 with its message, as root too: settings are read first."""
    assert run(["serve", "--port", "70000"], euid=lambda: 0) == 2
    assert "invalid setting port" in capsys.readouterr().err


def test_allow_root_from_flag_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """--allow-root and STRATA_ALLOW_ROOT=1 both set allow_root; the default is off."""
    assert config_from_args(parser().parse_args(["serve"])).allow_root is False
    assert config_from_args(parser().parse_args(["serve", "--allow-root"])).allow_root is True
    monkeypatch.setenv("STRATA_ALLOW_ROOT", "1")
    assert config_from_args(parser().parse_args(["serve"])).allow_root is True


def test_project_roots_from_flags_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--project-root repeats; STRATA_PROJECT_ROOTS separates roots like PATH (os.pathsep); a flag
    wins over the variable."""
    one, two = tmp_path / "one", tmp_path / "two"
    config = config_from_args(parser().parse_args(
        ["serve", "--project-root", str(one), "--project-root", str(two)]))
    assert config.project_roots == (one, two)
    monkeypatch.setenv("STRATA_PROJECT_ROOTS", f"{one}{os.pathsep}{two}{os.pathsep}")
    assert Config().project_roots == (one, two)
    flagged = config_from_args(parser().parse_args(["serve", "--project-root", str(two)]))
    assert flagged.project_roots == (two,)


@pytest.mark.parametrize(("root", "message"), [
    ("novels", "each project root must be an absolute path"),
    ("/etc/novels", "a project root cannot be in a place projects are refused (system)"),
    ("/proc", "a project root cannot be in a place projects are refused (system)"),
])
def test_unusable_project_roots_are_invalid_settings(root: str, message: str) -> None:
    """A relative root, or one inside a refused place (no project could ever open there), is an
    invalid setting naming project_roots."""
    with pytest.raises(ValidationError) as refused:
        Config(project_roots=(Path(root),))
    [error] = refused.value.errors()
    assert error["loc"] == ("project_roots",)
    assert message in error["msg"]


def test_a_root_inside_the_data_dir_is_invalid(tmp_path: Path) -> None:
    """A root inside the data dir is refused as such; one holding the data dir is fine."""
    with pytest.raises(ValidationError, match=r"refused \(data_dir\)"):
        Config(data_dir=tmp_path / "data", project_roots=(tmp_path / "data" / "novels",))
    assert Config(data_dir=tmp_path / "data", project_roots=(tmp_path,)).project_roots == (tmp_path,)


def test_a_bad_project_root_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """On the command line a refused root is one line on stderr and exit 2, before anything starts."""
    assert run(["serve", "--project-root", "/etc"], euid=lambda: 1000) == 2
    assert capsys.readouterr().err == ("strata: invalid setting project_roots: Value error, a project root "
                                       "cannot be in a place projects are refused (system)\n")


def test_the_config_gives_the_folder_policy(tmp_path: Path) -> None:
    """Config.folder_policy has the data dir and the allow-list of this run."""
    policy = Config(data_dir=tmp_path / "data", project_roots=(tmp_path / "novels",)).folder_policy()
    assert policy.verdict(str(tmp_path / "data" / "x")) == "data_dir"
    assert policy.verdict(str(tmp_path / "novels" / "one")) is None
    assert policy.verdict(str(tmp_path / "other")) == "not_allowed"
