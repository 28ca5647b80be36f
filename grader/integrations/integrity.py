"""What attnkit's nbgrader step runs on stays as it was when nbgrader started (used by integrations/nbgrade.py).

nbgrader runs every student's cells in a kernel of its own user before attnkit's step grades the notebook in
nbgrader's process. Where attnkit's files, or any directory Python imports from, are writable by that user, a cell
can change the code the step is about to run: rewrite a module, plant a bytecode cache, drop a .pth file. Three
defences, together:

1. `Snapshot`: every file and directory Python could run code from (attnkit's package and reference solutions,
   each directory on sys.path, nbgrader's configuration files), each file with its inode, size, mtime, ctime, mode
   and owner; taken when the course's configuration imports the step, before any student's cell runs. Any write
   updates a file's ctime, which no unprivileged process can set back: a later snapshot that equals the first one
   proves that nothing was written in between, even a file that was changed and then put back.
2. `preload`: every module of attnkit the step uses, each problem's spec, reference and catalogued mistakes,
   loaded before any student's cell runs and compiled from their sources; from then on the step reads none of
   attnkit's files (the sandboxes bind the few worker modules, whose results are never trusted anyway).
3. `import_guard.Guard`: from then on every module nbgrader's process imports (its own, nbclient's, torch's lazily loaded
   parts) is compiled from its source, never from a bytecode cache, and only once the bytes read are shown, on the
   very file descriptor they were read from, to be the file the snapshot recorded; a changed or new file is
   refused (ImportError) instead of run.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import stat
import sys
from pathlib import Path

PACKAGE = __name__.split(".")[0]
NO_BYTECODE = "/dev/null/attnkit-no-bytecode"
"""A sys.pycache_prefix under a device file: no bytecode cache can ever be read or written there."""
IMPORTABLE = (".py", ".pyc", ".pyw", ".pth", ".so", ".pyd", ".zip", ".egg")
SHARED = ("/", "/tmp", "/var/tmp", "/dev/shm", "/home", "/root")  # on sys.path, only their importable top level counts
CONFIG_NAMES = ("nbgrader_config.py", "nbgrader_config.json", "jupyter_config.py", "jupyter_config.json")


class IntegrityError(RuntimeError):
    """Files attnkit's grading depends on changed after nbgrader started: no grade may come from this process."""


def _record(st: os.stat_result) -> tuple:
    """A file's inode, size, mtime, ctime, mode and owner; a directory's inode, mode and owner (what it holds is
    recorded entry by entry: its own times change when a bytecode cache is first written in it)."""
    if stat.S_ISDIR(st.st_mode):
        return st.st_ino, st.st_mode, st.st_uid, st.st_gid
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode, st.st_uid, st.st_gid


def own_dirs() -> list[str]:
    """attnkit's package folder(s) and the reference solutions' folder."""
    from .. import REFERENCE_DIR

    return sorted({os.path.realpath(p) for p in sys.modules[PACKAGE].__path__} | {os.path.realpath(REFERENCE_DIR)})


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def roots() -> list[tuple[str, str]]:
    """(path, kind): "tree" (everything below, bytecode caches included, except attnkit's own: nothing reads those
    once the step has loaded its modules from their sources), "top" (the directory's importable entries only: the
    working directory or the script's folder at the head of sys.path, which hold the course itself), "file" (one
    path, present or not: a zip on sys.path, a configuration file)."""
    cwd = os.path.realpath(os.getcwd())
    head = {cwd}
    if sys.argv and sys.argv[0] and sys.argv[0] != "-c":
        head.add(os.path.dirname(os.path.realpath(sys.argv[0])))
    found: dict[str, str] = {d: "tree" for d in own_dirs()}
    for entry in sys.path:
        path = os.path.realpath(entry or cwd)
        if path in head or path in SHARED:
            found.setdefault(path, "top")
        elif os.path.isdir(path):
            found.setdefault(path, "tree")
        elif "__path_hook__" not in entry:  # a zip (or a path that is not there yet: creating it would count)
            found.setdefault(path, "file")
    import site

    if site.ENABLE_USER_SITE:  # the user's own site-packages: on sys.path at Python's next start once it exists
        user_site = os.path.realpath(site.getusersitepackages())
        found.setdefault(user_site, "tree" if os.path.isdir(user_site) else "file")
    try:
        from jupyter_core.paths import jupyter_config_path
        config_dirs = [*jupyter_config_path(), cwd]
    except ImportError:
        config_dirs = [cwd]
    for d in config_dirs:
        for name in CONFIG_NAMES:
            found.setdefault(os.path.join(os.path.realpath(d), name), "file")
    trees = [p for p, kind in found.items() if kind == "tree"]  # one inside another is walked with it
    return sorted((p, kind) for p, kind in found.items()
                  if kind == "top" or not any(t != p and _under(p, t) for t in trees))


class Snapshot:
    """Every file and directory below `roots()`, as (inode, size, mtime, ctime, mode, uid, gid); None: absent."""

    def __init__(self, files: dict, where: list[tuple[str, str]]):
        self.files, self.roots = files, where

    @classmethod
    def take(cls, where: list[tuple[str, str]] | None = None) -> "Snapshot":
        where = roots() if where is None else where
        files: dict = {}
        own = set(own_dirs())
        tops = {p for p, kind in where if kind == "top"}
        for path, kind in where:
            if kind == "file":
                files[path] = _lstat(path)
            elif kind == "top":
                _top(path, files)
            else:
                files[path] = _lstat(path)
                _walk(path, files, own, tops)
        return cls(files, where)

    def changes(self, later: "Snapshot", limit: int = 12) -> list[str]:
        """What differs from `later`: up to `limit` lines, 'path (changed|new|removed)', then how many more."""
        out = []
        for path in sorted(self.files.keys() | later.files.keys()):
            before, after = self.files.get(path), later.files.get(path)
            if before != after:
                out.append(f"{path} ({'new' if before is None else 'removed' if after is None else 'changed'})")
        return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])

    def check(self, path: str, st: os.stat_result) -> str | None:
        """Why the file `path`, whose stat is `st`, is not the one recorded (None: it is, or it lies outside)."""
        real = os.path.realpath(path)
        inside = False
        for root, kind in self.roots:
            if (kind == "tree" and _under(real, root)) or (kind == "top" and _under(real, root) and real != root) \
                    or (kind == "file" and real == root):
                inside = True
                break
        if not inside:
            return None
        recorded = self.files.get(real)
        if recorded is None:
            return f"{real} was created after nbgrader started"
        if recorded != _record(st):
            return f"{real} changed since nbgrader started"
        return None


def _lstat(path: str):
    try:
        return _record(os.lstat(path))
    except OSError:
        return None


def _walk(top: str, files: dict, own: set, tops: set) -> None:
    stack = [(top, top in own)]
    while stack:
        directory, skip_bytecode = stack.pop()
        try:
            entries = os.scandir(directory)
        except OSError:
            continue
        with entries:
            for e in entries:
                if skip_bytecode and e.name == "__pycache__":
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                files[e.path] = _record(st)
                if stat.S_ISDIR(st.st_mode) and e.path not in tops:
                    stack.append((e.path, skip_bytecode or e.path in own))


def _top(directory: str, files: dict) -> None:
    """A directory's importable entries: its modules, .pth and zip files, and each folder's __init__ (a package)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for e in entries:
        try:
            is_dir = e.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            for name in ("__init__.py", "__init__.pyc"):
                path = os.path.join(e.path, name)
                record = _lstat(path)
                if record is not None:
                    files[path] = record
        elif e.name.endswith(IMPORTABLE):
            record = _lstat(e.path)
            if record is not None:
                files[e.path] = record


def preload() -> None:
    """Load now all that attnkit's step will run: its modules (not the command-line fronts nor the maintainers'
    tools), every problem's spec, reference and catalogued mistakes (the diagnosis runs patched references)."""
    import pkgutil

    package = sys.modules[PACKAGE]
    for m in pkgutil.walk_packages(package.__path__, PACKAGE + "."):
        if m.name.split(".")[1] in ("fronts", "dev", "solutions") or m.name == f"{PACKAGE}.run.preload":
            continue  # the commands, the maintainers' tools, the references (loaded below), the forkserver's own
        try:
            importlib.import_module(m.name)
        except ModuleNotFoundError as exc:  # an optional dependency of a module the step does not use (distributed)
            if (exc.name or PACKAGE).split(".")[0] == PACKAGE:
                raise
    from ..diagnose.diagnose import candidates
    from ..judge.reference import reference
    from ..problems import all_problems

    for problem in all_problems():
        reference(problem)
        for _, _, target in candidates(problem, problem.requires):
            target()


def writable(paths, user: str | None = None) -> list[str]:
    """Those of `paths` that `user` (default: this process's user) could write: change a file, or add, remove or
    rename an entry of a folder. Its owner can always (`chmod u+w` gives write access back), root anything; others
    as the mode's group and other bits (or, for this process's user, an ACL) allow; nobody on a read-only mount."""
    import pwd

    if user:
        entry = pwd.getpwnam(user)
        uid, gids = entry.pw_uid, set(os.getgrouplist(user, entry.pw_gid))
    else:
        uid, gids = os.geteuid(), {os.getegid(), *os.getgroups()}
    out = []
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        if uid == 0 or st.st_uid == uid:
            ok = True
        else:
            ok = bool(st.st_mode & (stat.S_IWGRP if st.st_gid in gids else stat.S_IWOTH))
            ok = ok or (not user and os.access(path, os.W_OK))
        if ok and not _read_only_mount(path):
            out.append(path)
    return out


def _read_only_mount(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def install_paths(snapshot: Snapshot) -> list[str]:
    """What a student's cell must not be able to write: attnkit's folders, files and bytecode caches, the folders
    holding them, and each directory on sys.path with its parent (a new .pth file there runs at Python's start)."""
    own = own_dirs()
    paths = set()
    for d in own:
        paths |= {d, os.path.dirname(d)}
        for p in Path(d).rglob("*"):
            paths.add(str(p))
    for root, kind in snapshot.roots:
        if kind == "tree" and root not in own:
            paths |= {root, os.path.dirname(root)}
    return sorted(paths)
