"""Where a project may be: a writer's folder, never the system's, another user's or Strata's own.

A project's folder is listed, read, indexed and written into on a client's
word, so ``project:open`` refuses these places with ``PROJECT_PATH_FORBIDDEN``
and a ``reason`` (the path is never repeated):

* ``root``: the root of a file system (``/``, ``C:\\``, ``\\\\server\\share``);
* ``data_dir``: the server's data dir, anything inside it and anything holding it;
* ``system``: the platform's system trees (:data:`LINUX`, :data:`MACOS`,
  :data:`WINDOWS`) and anything inside them, except the temp folders kept
  there (``/var/tmp``, macOS's ``/private/var/folders``) and the current
  user's own home;
* ``other_user``: another user's home: anything in a folder of homes
  (``/home``, ``/Users``, ``C:\\Users``, and the folder holding the current
  home) other than the current home, that folder itself, and the homes of
  other accounts that sit elsewhere (``/root`` on Linux);
* ``not_allowed``: with an allow-list of roots (``--project-root``), anything
  not inside one of them. The allow-list only narrows: the places above stay
  refused inside it.

Each rule is checked on the path as given (``..`` and doubled separators
folded, case folded where the file system ignores it) and on its real path
(every link followed), and both must pass: a link in a writer's folder that
points at ``/etc`` is refused, and so is ``/tmp/../etc``. The rules are data
per platform and the machine's facts (home, temp folder, environment, how to
resolve links) are inputs, so every platform's rules are tested on any machine.
"""

from __future__ import annotations

import dataclasses
import ntpath
import os
import posixpath
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from services.errors import ProjectPathForbidden, ProjectPathInvalid

Reason = Literal["root", "data_dir", "system", "other_user", "not_allowed"]
REASONS: tuple[Reason, ...] = get_args(Reason)

MESSAGES: dict[Reason, str] = {
    "root": "A project cannot be the root of a file system: open a folder of your documents",
    "data_dir": "A project cannot be Strata's own data folder, a folder inside it or a folder holding it",
    "system": "A project cannot be a system folder or a folder inside one",
    "other_user": "A project cannot be in another user's home folder",
    "not_allowed": "A project must be inside one of the folders this server allows (--project-root)",
}

Key = tuple[str, ...]  # a path as comparable parts: the anchor ("" or a drive), then each name


@dataclass(frozen=True, slots=True)
class PlatformRules:
    """The places of one platform that are never a writer's folder."""

    name: str
    windows: bool  # Windows paths: drives, backslashes
    case_insensitive: bool  # the usual file system ignores case (macOS, Windows)
    system: tuple[str, ...]  # system trees: refused, with everything inside them
    carve_outs: tuple[str, ...]  # folders inside system trees that stay open (temp folders)
    user_folders: tuple[str, ...]  # folders of users' homes: only the current home is open
    fixed_homes: tuple[str, ...] = ()  # other accounts' homes outside those folders


LINUX = PlatformRules(
    name="linux", windows=False, case_insensitive=False,
    system=("/proc", "/sys", "/dev", "/etc", "/boot", "/efi", "/usr", "/bin", "/sbin", "/lib", "/lib32",
            "/lib64", "/libx32", "/var", "/run", "/snap", "/opt", "/nix", "/lost+found"),
    carve_outs=("/var/tmp",),  # noqa: S108  (a place allowed, not a file made there)
    user_folders=("/home",),
    fixed_homes=("/root",),
)

MACOS = PlatformRules(
    name="darwin", windows=False, case_insensitive=True,
    # /etc, /var and /tmp are links into /private; their own spellings are listed for the lexical check.
    system=("/System", "/Library", "/Applications", "/private", "/usr", "/bin", "/sbin", "/etc", "/var",
            "/dev", "/cores", "/opt", "/nix", "/.vol"),
    carve_outs=("/private/tmp", "/private/var/tmp", "/private/var/folders",
                "/var/tmp", "/var/folders"),  # noqa: S108  (places allowed, not files made there)
    user_folders=("/Users",),
)

WINDOWS = PlatformRules(
    name="win32", windows=True, case_insensitive=True,
    system=("C:\\Windows", "C:\\Program Files", "C:\\Program Files (x86)", "C:\\ProgramData",
            "C:\\$Recycle.Bin", "C:\\System Volume Information", "C:\\Recovery", "C:\\Boot"),
    carve_outs=(),
    user_folders=("C:\\Users", "C:\\Documents and Settings"),
)

# Where Windows says its system folders are, when they are not on C: or not in the usual place.
_WINDOWS_SYSTEM_VARIABLES = ("SystemRoot", "windir", "ProgramFiles", "ProgramFiles(x86)", "ProgramW6432",
                             "ProgramData", "ALLUSERSPROFILE")


def platform_rules(platform: str = sys.platform, environ: Mapping[str, str] = os.environ) -> PlatformRules:
    """The rules of ``platform`` (a ``sys.platform`` value); other Unix systems get Linux's."""
    if platform.startswith("win") or platform == "cygwin":
        found = tuple(environ[name] for name in _WINDOWS_SYSTEM_VARIABLES if environ.get(name))
        users = environ.get("PUBLIC", "")
        extra_users = (ntpath.dirname(users),) if users else ()
        return dataclasses.replace(WINDOWS, system=(*WINDOWS.system, *found),
                                   user_folders=(*WINDOWS.user_folders, *extra_users))
    if platform == "darwin":
        return MACOS
    return LINUX


def _within(path: Key, tree: Key) -> bool:
    return path[:len(tree)] == tree


class FolderPolicy:
    """Decides whether a folder may be a project on this machine (see the module's rules)."""

    def __init__(self, rules: PlatformRules, *, home: str | None = None, data_dirs: Sequence[str] = (),
                 allowed: Sequence[str] = (), carve_outs: Sequence[str] = (),
                 resolve: Callable[[str], str] | None = None) -> None:
        """``resolve`` gives a path's real path; by default the OS's, when ``rules`` are this OS's."""
        self.rules = rules
        native = rules.windows == (os.name == "nt")
        self._resolve = resolve or (os.path.realpath if native else (lambda path: path))
        self._data = self._forms(data_dirs)
        self._allowed = self._forms(allowed)
        self._system = self._forms(rules.system)
        self._homes = self._forms([home] if home else [])
        # Open inside system trees: the temp folders and the user's own home (macOS keeps root's in
        # /var/root), each only when strictly inside a system tree, so that no temp folder set to
        # "/" or "/var" opens a whole tree.
        self._carve_outs = tuple(
            tree for tree in (*self._forms([*rules.carve_outs, *carve_outs]), *self._homes)
            if any(_within(tree, system) and tree != system for system in self._system))
        parents = {h[:-1] for h in self._homes if len(h) > 2}  # the folder holding the home, not "/"
        self._user_folders = (*self._forms(rules.user_folders),
                              *(p for p in parents if not self._in_system(p)))
        self._fixed_homes = tuple(h for h in self._forms(rules.fixed_homes) if h not in self._homes)

    @classmethod
    def for_this_machine(cls, *, data_dir: Path | None = None, allowed: Iterable[Path] = ()) -> FolderPolicy:
        """The rules of the running platform, for the current user, the data dir and the allow-list."""
        try:
            home: str | None = str(Path.home())
        except (RuntimeError, KeyError):  # no home known: every home is another user's
            home = None
        if home is not None and not os.path.isabs(home):
            home = None
        return cls(platform_rules(), home=home,
                   data_dirs=[os.path.abspath(data_dir)] if data_dir is not None else [],
                   allowed=[os.path.abspath(root) for root in allowed],
                   carve_outs=[os.path.abspath(tempfile.gettempdir())])

    # -- deciding

    def verdict(self, path: str, real: str | None = None) -> Reason | None:
        """Why ``path`` (whose real path is ``real``, resolved if not given) cannot be a project;
        None when it can. ``path`` must be absolute."""
        forms = {self._key(path), self._key(self._resolve(path) if real is None else real)}
        for reason, refused in self._checks():
            if any(refused(form) for form in forms):
                return reason
        if self._allowed and not all(any(_within(form, root) for root in self._allowed) for form in forms):
            return "not_allowed"
        return None

    def check(self, path: str, real: str | None = None) -> None:
        """ProjectPathForbidden with the reason, unless ``path`` may be a project."""
        reason = self.verdict(path, real)
        if reason is not None:
            raise forbidden(reason)

    def root_problem(self, root: str) -> Reason | None:
        """Why ``root`` cannot be a root of the allow-list: it lies inside a refused place. A root
        holding refused places is fine (they stay refused inside it)."""
        for form in {self._key(root), self._key(self._resolve(root))}:
            if any(_within(form, data) for data in self._data):
                return "data_dir"
            if self._in_system(form):
                return "system"
            if self._other_user(form, holding=False):
                return "other_user"
        return None

    def _checks(self) -> tuple[tuple[Reason, Callable[[Key], bool]], ...]:
        return (
            ("root", lambda form: len(form) == 1),
            ("data_dir", lambda form: any(_within(form, d) or _within(d, form) for d in self._data)),
            ("system", self._in_system),
            ("other_user", self._other_user),
        )

    def _in_system(self, form: Key) -> bool:
        if self.rules.windows and form[0][:3] in ("\\\\.", "\\\\?"):  # device namespaces
            return True
        return (any(_within(form, tree) for tree in self._system)
                and not any(_within(form, tree) for tree in self._carve_outs))

    def _other_user(self, form: Key, holding: bool = True) -> bool:
        """In another user's home; with ``holding``, also a folder of homes itself."""
        if any(_within(form, home) for home in self._homes):
            return False
        if any(_within(form, home) for home in self._fixed_homes):
            return True
        return any(_within(form, users) and (holding or form != users) for users in self._user_folders)

    # -- paths as keys

    def _forms(self, paths: Iterable[str]) -> tuple[Key, ...]:
        """Each path's key as given and as resolved, without repeats."""
        keys: dict[Key, None] = {}
        for path in paths:
            keys[self._key(path)] = None
            keys[self._key(self._resolve(path))] = None
        return tuple(keys)

    def _key(self, path: str) -> Key:
        if self.rules.windows:
            key = _windows_key(path)
        else:
            if not path.startswith("/"):
                raise ProjectPathInvalid()
            key = ("", *(part for part in posixpath.normpath(path).split("/") if part))
        return tuple(part.casefold() for part in key) if self.rules.case_insensitive else key


def _windows_key(path: str) -> Key:
    """A Windows path's key: long-path prefixes dropped, and each name as Windows reads it (trailing
    dots and spaces and an alternate stream's ``:name`` do not change which folder it is)."""
    spelled = path.replace("/", "\\")
    for prefix, instead in (("\\\\?\\UNC\\", "\\\\"), ("\\\\?\\", ""), ("\\??\\", "")):
        if spelled.startswith(prefix):
            spelled = instead + spelled[len(prefix):]
            break
    drive, rest = ntpath.splitdrive(ntpath.normpath(spelled))
    if not drive or (not rest.startswith("\\") and not drive.startswith("\\\\")):
        raise ProjectPathInvalid()  # relative to a drive's current folder: not one place
    names = (name.split(":", 1)[0].rstrip(" .") for name in rest.split("\\"))
    return (drive, *(name for name in names if name))


def forbidden(reason: Reason) -> ProjectPathForbidden:
    """The error for a refused folder: its reason and the message that explains it."""
    return ProjectPathForbidden(MESSAGES[reason], reason=reason)
