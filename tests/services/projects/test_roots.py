# ruff: noqa: S108  (paths here are judged, never made: /tmp and /var/tmp are data)
"""Where a project may be: the rules of each platform, checked on any machine.

Every platform's rules are data (services/projects/roots.py); the machine's facts (home, data
dir, how links resolve) are injected here, so the macOS and Windows rules are tested on Linux.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from services.errors import ProjectPathForbidden, ProjectPathInvalid
from services.projects.roots import (
    LINUX,
    MACOS,
    MESSAGES,
    REASONS,
    WINDOWS,
    FolderPolicy,
    PlatformRules,
    platform_rules,
)


def links(table: dict[str, str]) -> Callable[[str], str]:
    """A fake realpath: the paths in ``table`` (and anything under them) resolve to their targets."""
    def resolve(path: str) -> str:
        for link, target in table.items():
            if path == link or path.startswith(link.rstrip("/\\") + ("\\" if "\\" in link else "/")):
                return target + path[len(link):]
        return path
    return resolve


def linux(home: str = "/home/alice", resolve: Callable[[str], str] | None = None,
          allowed: tuple[str, ...] = ()) -> FolderPolicy:
    return FolderPolicy(LINUX, home=home, data_dirs=["/home/alice/.local/share/strata"], allowed=allowed,
                        resolve=resolve or links({}))


@pytest.mark.parametrize(("path", "reason"), [
    ("/", "root"),
    ("//", "root"),
    ("/home/alice/.local/share/strata", "data_dir"),
    ("/home/alice/.local/share/strata/logs", "data_dir"),
    ("/home/alice/.local/share/strata/", "data_dir"),
    ("/home/alice/.local/share", "data_dir"),
    ("/home/alice", "data_dir"),
    ("/etc", "system"),
    ("/etc/ssh", "system"),
    ("//etc", "system"),
    ("/tmp/../etc", "system"),
    ("/proc/4242", "system"),
    ("/sys/kernel", "system"),
    ("/dev/shm", "system"),
    ("/boot", "system"),
    ("/usr/share/doc", "system"),
    ("/bin", "system"),
    ("/sbin", "system"),
    ("/lib", "system"),
    ("/lib64", "system"),
    ("/var", "system"),
    ("/var/lib/postgresql", "system"),
    ("/run/user/1000", "system"),
    ("/snap/core", "system"),
    ("/opt/app", "system"),
    ("/home/bob", "other_user"),
    ("/home/bob/novel", "other_user"),
    ("/home", "data_dir"),  # it holds the data dir: the first reason found is given
    ("/home/alice/../bob", "other_user"),
    ("/root", "other_user"),
    ("/root/novel", "other_user"),
])
def test_linux_refuses_each_place_with_its_reason(path: str, reason: str) -> None:
    """Linux: the root, the data dir (inside and holding it), each system tree, other users' homes
    (and /root, root's home elsewhere) are refused, each with its stable reason word."""
    assert linux().verdict(path) == reason


@pytest.mark.parametrize("path", [
    "/home/alice/novel", "/home/alice/Documents/第一部", "/tmp/pytest-of-root/pytest-3/novel", "/tmp",
    "/var/tmp/draft", "/mnt/usb/novel", "/media/alice/drive/book", "/srv/novels",
    "/home/alice/.local/share/x", "/etcetera/novel", "/homework", "/libraries/novel",
])
def test_linux_opens_a_writers_folders(path: str) -> None:
    """The writer's own home, temp folders (also /var/tmp inside /var), mounted drives and lookalike
    names of refused places (/etcetera, /homework) are fine."""
    assert linux().verdict(path) is None


def test_a_link_into_a_refused_place_is_refused() -> None:
    """A folder reached through a link is judged by where it lands too: a link in tmp to /etc,
    to /proc/self's target, or to another user's home is refused; a link to a writer's folder is fine."""
    policy = linux(resolve=links({"/tmp/etc-link": "/etc", "/tmp/self": "/proc/4242",
                                  "/tmp/bob": "/home/bob", "/tmp/mine": "/home/alice/novel",
                                  "/tmp/data": "/home/alice/.local/share/strata"}))
    assert policy.verdict("/tmp/etc-link") == "system"
    assert policy.verdict("/tmp/etc-link/ssh") == "system"
    assert policy.verdict("/tmp/self") == "system"
    assert policy.verdict("/tmp/bob") == "other_user"
    assert policy.verdict("/tmp/data") == "data_dir"
    assert policy.verdict("/tmp/mine") is None


def test_the_given_spelling_is_judged_too() -> None:
    """Both the path as given and its real path must pass: a refused spelling is refused even when
    it resolves somewhere harmless (the check never relies on links alone)."""
    policy = linux(resolve=links({"/etc/novel-link": "/tmp/novel"}))
    assert policy.verdict("/etc/novel-link") == "system"
    assert policy.verdict("/tmp/novel", real="/tmp/novel") is None


def test_the_real_path_given_is_used() -> None:
    """A caller that already resolved the path passes its real path, and that is what is judged."""
    assert linux().verdict("/tmp/novel", real="/etc") == "system"


def test_running_as_root_other_users_are_the_homes_folder() -> None:
    """As root (home /root, whose parent is /): /root and inside it are root's own, every home in
    /home is another user's, and the rest of the disk is judged as for anyone (tmp stays open)."""
    policy = FolderPolicy(LINUX, home="/root", data_dirs=["/root/.local/share/strata"], resolve=links({}))
    assert policy.verdict("/root/novel") is None
    assert policy.verdict("/home/alice/novel") == "other_user"
    assert policy.verdict("/home") == "other_user"
    assert policy.verdict("/tmp/pytest-of-root/pytest-1/novel") is None
    assert policy.verdict("/srv/novels") is None
    assert policy.verdict("/root") == "data_dir"  # it holds the data dir


def test_the_folder_holding_the_home_is_a_folder_of_homes() -> None:
    """Homes kept somewhere unusual (/net/home/alice) make their siblings other users' homes."""
    policy = FolderPolicy(LINUX, home="/net/home/alice", resolve=links({}))
    assert policy.verdict("/net/home/bob") == "other_user"
    assert policy.verdict("/net/home") == "other_user"
    assert policy.verdict("/net/home/alice/novel") is None
    assert policy.verdict("/net/scratch") is None


def test_a_home_inside_a_system_tree_stays_the_users_own() -> None:
    """A service account whose home is /var/lib/strata may open folders in it, not its neighbours."""
    policy = FolderPolicy(LINUX, home="/var/lib/strata", resolve=links({}))
    assert policy.verdict("/var/lib/strata/novel") is None
    assert policy.verdict("/var/lib/postgresql") == "system"


def test_no_home_known_means_every_home_is_another_users() -> None:
    """Without a home, /home and everything in it is refused; tmp is fine."""
    policy = FolderPolicy(LINUX, resolve=links({}))
    assert policy.verdict("/home/alice/novel") == "other_user"
    assert policy.verdict("/tmp/novel") is None


def test_a_temp_folder_set_to_a_whole_tree_opens_nothing() -> None:
    """Temp folders are exceptions only when strictly inside a system tree: a temp folder of "/"
    or "/var" does not open /etc or /var."""
    policy = FolderPolicy(LINUX, home="/home/alice", carve_outs=["/", "/var", "/var/cache/tmp"],
                          resolve=links({}))
    assert policy.verdict("/etc") == "system"
    assert policy.verdict("/var/lib") == "system"
    assert policy.verdict("/var/cache/tmp/novel") is None


def test_allow_list_narrows_to_its_roots() -> None:
    """With roots given, a project must be inside one of them (as given and as resolved); the roots
    never open a refused place, and a link out of a root is refused."""
    policy = linux(allowed=("/srv/novels", "/home/alice/Writing"),
                   resolve=links({"/srv/novels/escape": "/srv/other", "/tmp/in": "/srv/novels/book"}))
    assert policy.verdict("/srv/novels/book") is None
    assert policy.verdict("/srv/novels") is None
    assert policy.verdict("/home/alice/Writing/第一部") is None
    assert policy.verdict("/srv/other") == "not_allowed"
    assert policy.verdict("/srv/novels/../other") == "not_allowed"
    assert policy.verdict("/srv/novelsx") == "not_allowed"
    assert policy.verdict("/srv/novels/escape") == "not_allowed"
    assert policy.verdict("/tmp/in") == "not_allowed"  # given outside, though it lands inside
    assert policy.verdict("/tmp/novel") == "not_allowed"
    wide = linux(allowed=("/",))
    assert wide.verdict("/etc") == "system"
    assert wide.verdict("/home/bob") == "other_user"
    assert wide.verdict("/tmp/novel") is None


def test_allow_list_roots_resolve_like_projects() -> None:
    """A root that is a link allows the folders under both its spelling and its target."""
    policy = linux(allowed=("/home/alice/Novels",), resolve=links({"/home/alice/Novels": "/mnt/disk/novels"}))
    assert policy.verdict("/home/alice/Novels/book") is None
    assert policy.verdict("/mnt/disk/novels/book") is None
    assert policy.verdict("/mnt/disk/other") == "not_allowed"


@pytest.mark.parametrize(("root", "problem"), [
    ("/etc/novels", "system"),
    ("/var/lib", "system"),
    ("/home/alice/.local/share/strata/novels", "data_dir"),
    ("/home/bob/novels", "other_user"),
    ("/root/novels", "other_user"),
    ("/", None),
    ("/home", None),
    ("/home/alice", None),
    ("/srv/novels", None),
    ("/var/tmp/novels", None),
])
def test_which_allow_list_roots_make_sense(root: str, problem: str | None) -> None:
    """An allow-list root inside a refused place could never hold a project and is reported; a root
    that merely holds refused places (/, /home, the home holding the data dir) is fine."""
    assert linux().root_problem(root) == problem


def mac(home: str = "/Users/alice", resolve: Callable[[str], str] | None = None) -> FolderPolicy:
    return FolderPolicy(MACOS, home=home, data_dirs=["/Users/alice/Library/Application Support/strata"],
                        resolve=resolve or links({"/etc": "/private/etc", "/var": "/private/var",
                                                  "/tmp": "/private/tmp"}))


@pytest.mark.parametrize(("path", "reason"), [
    ("/", "root"),
    ("/System/Library", "system"),
    ("/Library/Preferences", "system"),
    ("/Applications/Pages.app", "system"),
    ("/private", "system"),
    ("/private/etc", "system"),
    ("/etc", "system"),
    ("/ETC", "system"),
    ("/system/library", "system"),
    ("/usr/local", "system"),
    ("/opt/homebrew", "system"),
    ("/var/db", "system"),
    ("/Users/bob", "other_user"),
    ("/users/BOB/Novel", "other_user"),
    ("/Users/Shared", "other_user"),
    ("/Users", "data_dir"),
    ("/Users/alice/Library/Application Support/strata", "data_dir"),
    ("/users/alice/library/application support/STRATA/logs", "data_dir"),
])
def test_macos_refuses_each_place(path: str, reason: str) -> None:
    """macOS: /System, /Library, /Applications, /private (and /etc, /var through their links),
    whatever the case of the spelling, and other users' homes in /Users are refused."""
    assert mac().verdict(path) == reason


@pytest.mark.parametrize("path", [
    "/Users/alice/Documents/Novel", "/users/alice/novel", "/Volumes/Drive/novel", "/tmp/novel",
    "/private/tmp/novel", "/var/folders/xy/abc/T/pytest-of-alice/novel",
    "/private/var/folders/xy/abc/T/novel", "/Users/alice/Library/Mobile Documents/novel",
])
def test_macos_opens_a_writers_folders(path: str) -> None:
    """macOS: the writer's home (its own Library too), external volumes and the temp folders kept
    in /private are fine."""
    assert mac().verdict(path) is None


def test_macos_root_home_is_its_own() -> None:
    """root's home on macOS is /var/root, inside a system tree: root may still open folders in it."""
    policy = mac(home="/var/root", resolve=links({"/var": "/private/var"}))
    assert policy.verdict("/var/root/novel") is None
    assert policy.verdict("/var/db") == "system"
    assert policy.verdict("/Users/bob") == "other_user"


def windows(environ: dict[str, str] | None = None) -> FolderPolicy:
    return FolderPolicy(platform_rules("win32", environ or {}), home="C:\\Users\\alice",
                        data_dirs=["C:\\Users\\alice\\AppData\\Local\\strata"])


@pytest.mark.parametrize(("path", "reason"), [
    ("C:\\", "root"),
    ("D:\\", "root"),
    ("c:/", "root"),
    ("\\\\server\\share", "root"),
    ("C:\\Windows", "system"),
    ("C:\\Windows\\System32\\config", "system"),
    ("c:\\WINDOWS\\system32", "system"),
    ("C:/Windows/Temp", "system"),
    ("C:\\Windows.", "system"),
    ("C:\\Windows \\System32", "system"),
    ("C:\\Windows::$INDEX_ALLOCATION", "system"),
    ("\\\\?\\C:\\Windows", "system"),
    ("\\\\.\\C:\\novel", "system"),
    ("C:\\Program Files\\App", "system"),
    ("C:\\Program Files (x86)\\App", "system"),
    ("C:\\ProgramData\\App", "system"),
    ("C:\\Users\\alice\\Documents\\..\\..\\bob", "other_user"),
    ("C:\\Users\\bob", "other_user"),
    ("c:\\users\\BOB\\Documents", "other_user"),
    ("C:\\Users\\Public\\Documents", "other_user"),
    ("C:\\Users", "data_dir"),
    ("C:\\Documents and Settings\\bob", "other_user"),
    ("C:\\Users\\alice\\AppData\\Local\\strata", "data_dir"),
    ("c:\\users\\alice\\appdata\\local\\STRATA\\logs", "data_dir"),
])
def test_windows_refuses_each_place(path: str, reason: str) -> None:
    """Windows: drive and share roots, C:\\Windows, Program Files (both), ProgramData and other users'
    folders in C:\\Users are refused, however they are spelled (case, slashes, trailing dots and
    spaces, an alternate stream, the long-path prefix)."""
    assert windows().verdict(path) == reason


@pytest.mark.parametrize("path", [
    "C:\\Users\\alice\\Documents\\Novel", "c:/users/alice/novel", "D:\\Novels\\第一部",
    "\\\\server\\share\\novels", "C:\\Users\\alice\\AppData\\Local\\Temp\\pytest-1\\novel",
    "C:\\Program Files Data\\novel", "C:\\Windowsx\\novel",
])
def test_windows_opens_a_writers_folders(path: str) -> None:
    """Windows: the writer's folders on any drive or share, the user's own temp folder and lookalike
    names of system folders are fine."""
    assert windows().verdict(path) is None


def test_windows_system_folders_come_from_the_environment_too() -> None:
    """Where Windows says its folders are (SystemRoot, ProgramFiles, ProgramData, ...) is refused,
    on whichever drive; the parent of PUBLIC is a folder of homes."""
    policy = windows({"SystemRoot": "D:\\WINNT", "ProgramFiles": "E:\\Apps", "ProgramData": "D:\\Data",
                      "PUBLIC": "F:\\People\\Public"})
    assert policy.verdict("D:\\winnt\\system32") == "system"
    assert policy.verdict("E:\\Apps\\x") == "system"
    assert policy.verdict("D:\\Data") == "system"
    assert policy.verdict("F:\\People\\bob") == "other_user"
    assert policy.verdict("D:\\Novels") is None


def test_windows_paths_relative_to_a_drive_are_invalid() -> None:
    """``C:novel`` and ``\\novel`` name no one place: they are invalid, not judged."""
    for path in ("C:novel", "\\novel"):
        with pytest.raises(ProjectPathInvalid):
            windows().verdict(path)


def test_platforms_are_chosen_by_name() -> None:
    """sys.platform picks the rules: win32 and cygwin Windows', darwin macOS', anything else Linux's."""
    assert platform_rules("darwin", {}) is MACOS
    assert platform_rules("linux", {}) is LINUX
    assert platform_rules("freebsd14", {}) is LINUX
    assert platform_rules("win32", {}).system == WINDOWS.system
    assert platform_rules("cygwin", {}).windows


def test_the_error_names_the_reason_and_never_the_path() -> None:
    """check raises PROJECT_PATH_FORBIDDEN with data.reason and a message per reason, without the path."""
    with pytest.raises(ProjectPathForbidden) as refused:
        linux().check("/etc/secret-place")
    error = refused.value.to_error()
    assert error["code"] == -32017
    assert error["data"] == {"code": "PROJECT_PATH_FORBIDDEN", "reason": "system"}
    assert error["message"] == MESSAGES["system"]
    assert "secret-place" not in str(error)
    assert set(MESSAGES) == set(REASONS)


def test_this_machine_refuses_system_trees_and_opens_tmp(tmp_path: Path) -> None:
    """On the machine running the tests: /etc, /proc/self and / are refused, the data dir too, a
    tmp folder opens, and a relative data dir is taken from the working folder."""
    policy = FolderPolicy.for_this_machine(data_dir=tmp_path / "data")
    assert policy.verdict("/etc") == "system"
    assert policy.verdict("/proc/self") == "system"
    assert policy.verdict("/") == "root"
    assert policy.verdict(str(tmp_path / "data" / "logs")) == "data_dir"
    assert policy.verdict(str(tmp_path / "novel")) is None
    relative = FolderPolicy.for_this_machine(data_dir=Path("data"))
    assert relative.verdict(os.path.join(os.getcwd(), "data", "x")) == "data_dir"


def test_a_relative_home_is_no_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """A HOME that is not absolute tells nothing: it is ignored, not joined to the working folder."""
    monkeypatch.setenv("HOME", "relative/home")
    policy = FolderPolicy.for_this_machine()
    assert policy.verdict("/home/anyone") == "other_user"


def test_rules_are_data() -> None:
    """Each platform's rules are plain frozen data: places, not code."""
    for rules in (LINUX, MACOS, WINDOWS):
        assert isinstance(rules, PlatformRules)
        assert all(isinstance(place, str) for place in (*rules.system, *rules.carve_outs,
                                                        *rules.user_folders, *rules.fixed_homes))
    assert {"/proc", "/sys", "/dev", "/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/var",
            "/run"} <= set(LINUX.system)
