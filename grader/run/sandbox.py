"""The worker's sandbox, entered before any learner code runs.

Always: a new session (its process group is killed at the end), resource limits (CPU time,
memory, output, processes), a scrubbed environment, and a private copy of the submission
as the working directory. As root (a container, a CI runner), also: a private mount
namespace in which the reference solutions, the grader's files, the kit's tests and state,
and every shared temporary directory are hidden behind empty tmpfs mounts; then a drop to a
unique unprivileged uid with no way to regain privileges, so the worker can neither read
the references nor write anything of the grader's or the learner's, and every process it
starts is found by uid and killed when grading ends. Without root those two layers are
skipped; as root without the right to mount (a container with Docker's default capabilities,
where bubblewrap cannot run either) the mounts are skipped and the uid drop stays: `isolation()`
reports which.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import os
import resource
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import syscalls
from .limits import Limits  # noqa: F401 - a leaf of their own (the pytest plugin reads them early)

CLONE_NEWNS, MS_RDONLY, MS_REC, MS_PRIVATE, PR_SET_NO_NEW_PRIVS = 0x00020000, 1, 16384, 1 << 18, 38
PR_SET_DUMPABLE, MS_BIND, MS_REMOUNT = 4, 4096, 32
SUBMISSION = "/tmp/attnkit-submission"
UID_BASE = 200000  # worker uid = UID_BASE + its pid: unique among live processes
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")
"""The folders every user may write on a usual system (lock files: /run/lock): each worker gets empty private ones."""


def hidden_paths() -> list[str]:
    from .. import REFERENCE_DIR, ROOT
    from ..defaults import cache_root
    from ..extensions import solution_dirs

    grader_dir = Path(__file__).resolve().parent.parent  # the package's folder
    kit = [REFERENCE_DIR, *solution_dirs(), grader_dir, *filter(None, [cache_root()])]  # the stored expected values
    if grader_dir == ROOT / "grader":  # a checkout (not a wheel in site-packages): its tests, state and history
        kit += [ROOT / "tests", ROOT / ".attnkit", ROOT / ".git"]  # .git holds them all
    return [str(p) for p in kit if p.exists()]


def isolation(sandbox: str = "process") -> str:
    """How a grading was isolated, in words (its report's `sandbox`)."""
    if sandbox == "bubblewrap":
        return "bubblewrap (own PID, network and mount namespaces; " + \
            ("an unprivileged uid)" if os.geteuid() == 0 else "a user namespace)")
    if os.geteuid() == 0 and not mounts_allowed():
        return ("process sandbox, root without the right to mount (unprivileged uid; no private mounts: the kit's "
                "files readable, /tmp shared; shared PID and network namespaces)")
    return "process sandbox, root (private mounts, unprivileged uid; shared PID and network namespaces)" \
        if os.geteuid() == 0 else \
        "process sandbox, not root (limits, scrubbed environment, private copy; the kit's files stay readable)"


class NoMounts(OSError):
    """The kernel refuses this process a mount namespace: root without CAP_SYS_ADMIN (a container's default)."""


@functools.lru_cache(maxsize=1)
def mounts_allowed() -> bool:
    """Whether a process here may make a private mount namespace (what `enter` tries as root), asked of a child."""
    import subprocess
    import sys

    code = f"import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare({CLONE_NEWNS}) != 0)"
    try:
        return subprocess.run([sys.executable, "-I", "-c", code], timeout=30, capture_output=True).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def enter(impl_dir: str, limits: Limits, hide: list[str], scratch_dir: str,
          programs: bool = False) -> tuple[str, int | None]:
    """Sandbox this process; returns (the submission copy's path, the uid now used or None).
    `scratch_dir` is an empty directory the parent made and removes after the worker ends: the private
    copy goes there, unless /tmp is private to this worker (then it vanishes with the namespace). `programs`: whether
    it may still start programs (syscalls.confine)."""
    os.setsid()
    files = _read(Path(impl_dir), limits)
    root = os.geteuid() == 0
    scratch = list(folders().free_tmp) if root else []
    if root:
        try:
            _private_mounts(hide, scratch, [] if "/tmp" in scratch else [scratch_dir])
        except NoMounts:  # root without the right to mount: the uid drop below still holds
            scratch = []
    work = Path(SUBMISSION if "/tmp" in scratch else scratch_dir)
    _write(work, files)
    uid = None
    if root:
        uid = worker_uid(os.getpid())
        chown_tree(str(work), uid)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        dumpable()
    no_new_privileges()
    _settle(work, limits, programs=programs)
    return str(work), uid


def enter_jailed(work: str, limits: Limits, uid: int | None = None, programs: bool = False) -> tuple[str, int | None]:
    """Inside bubblewrap (jail.py), which has done the isolation from the host: a session of its own, the limits.
    `uid` (the sandbox started as root): apart from the submission's other workers too (_apart). `programs`: as for
    enter."""
    os.setsid()
    scratch = _apart(work, uid) if uid is not None else None
    no_new_privileges()
    _settle(Path(work), limits, scratch, programs)
    return work, uid


JAIL_UID_BASE, JAIL_WORKERS = 300_000_000, 64
"""Jailed workers' uids (jail_worker_uids): above every worker_uid (UID_BASE + a pid below 2^22), JAIL_WORKERS per
sandbox."""


def jail_worker_uids(sandbox_uid: int, n: int) -> list[int]:
    """The uids of a root-started sandbox's n workers, from its own (UID_BASE + its pid): one each, shared with no other
    worker of any sandbox or process sandbox on the host."""
    if n > JAIL_WORKERS:
        raise ValueError(f"more than {JAIL_WORKERS} workers in one sandbox")
    return [JAIL_UID_BASE + (sandbox_uid - UID_BASE) * JAIL_WORKERS + i for i in range(n)]


def _apart(work: str, uid: int) -> Path:
    """A jailed worker, still root in its sandbox, set apart from the submission's other workers before any learner
    code runs: a /tmp and /dev/shm of its own (empty, private), the submission copy read-only (no worker rewrites what another
    imports after the grader read it), and a uid of its own (no sibling reads its memory or its files). Returns its
    scratch folder (HOME, TMPDIR)."""
    libc = _own_mounts()
    # the copy, and the interpreter's folders where they lie under /tmp (a virtual environment in a temporary clone),
    # held in this namespace and bound again, read-only, under the new /tmp
    inside = [work] + _outermost(d for d in _needed() if d and os.path.isdir(d) and under(d, "/tmp")
                                 and not under(d, work))
    held = {d: os.open(d, os.O_PATH | os.O_DIRECTORY) for d in inside}
    for shared in ("/tmp", "/dev/shm"):
        if os.path.isdir(shared) and libc.mount(b"tmpfs", shared.encode(), b"tmpfs", 0, b"size=64m,mode=1777") != 0:
            raise OSError(ctypes.get_errno(), f"a private {shared} failed")
    for d, fd in held.items():
        os.makedirs(d, mode=0o755, exist_ok=True)
        if libc.mount(f"/proc/self/fd/{fd}".encode(), d.encode(), None, MS_BIND | MS_REC, None) != 0 or \
                libc.mount(None, d.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None) != 0:
            raise OSError(ctypes.get_errno(), f"binding {d} read-only failed")
        os.close(fd)
    scratch = Path("/tmp/attnkit-worker")
    scratch.mkdir(mode=0o700)
    os.chown(scratch, uid, uid)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    dumpable()
    return scratch


NICE = 5
"""The workers' niceness: the grader's own process (expected values, judging) is the longest chain of a grading run,
and with a dozen workers runnable it would get a dozen's share of the CPU. At 5 a worker still gets a quarter of
a CPU held by a busy process of normal priority: far from its time limit."""


def _settle(work: Path, limits: Limits, scratch: Path | None = None, programs: bool = False) -> None:
    os.nice(NICE)
    os.environ.clear()
    # Temporary files (the learner's, torch's: inductor's cache directory) go to the private copy, which is removed
    # when the worker ends, also where /tmp is shared with the grader (an interpreter under /tmp); or to `scratch`
    # where the copy is read-only (a jailed worker set apart)
    tmp = scratch or work
    os.environ.update(PATH="/usr/bin:/bin", HOME=str(tmp), LANG="C.UTF-8", OMP_NUM_THREADS="1",
                      PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(tmp), TORCHINDUCTOR_CACHE_DIR=str(tmp / ".torchinductor"))
    tempfile.tempdir = str(tmp)
    _limit(limits)
    os.chdir(work)
    syscalls.confine(programs)  # sockets, signals, tracing and (mostly) programs refused; raises where it cannot


def dumpable() -> None:
    """A uid change leaves /proc/self owned by root: give it back to the process's own uid, so that it can
    reset and read its own peak resident memory (intercept.ResidentPeak); only that uid may use it."""
    _libc().prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)


def no_new_privileges() -> None:
    _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def copy_submission(impl_dir: str, limits: Limits, scratch: str) -> None:
    """The parent's private copy of a submission for a jailed worker (sizes checked before reading)."""
    _write(Path(scratch), _read(Path(impl_dir), limits))


def _write(work: Path, files: dict[str, bytes]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(data)


def readable_tree(path: str) -> None:
    """Folders 0755 and files 0644 under `path` (whatever the umask made them): readable, and writable by the owner
    alone."""
    for p in [Path(path), *Path(path).rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)


def chown_tree(path: str, uid: int) -> None:
    for p in [Path(path), *Path(path).rglob("*")]:
        os.chown(p, uid, uid, follow_symlinks=False)


MAX_FILES = 1000


def compiled(name: str) -> bool:
    """A file Python would import as code with no source to read: bytecode (.pyc) or an extension module (.so)."""
    import importlib.machinery as m

    return name.endswith(tuple(m.BYTECODE_SUFFIXES + m.EXTENSION_SUFFIXES))


def unnamed_source(relative: str) -> bool:
    """A source file (relative to the submission) that no import statement can name, since a folder or its own name is
    not a Python identifier (`my-helper.py`): only importlib reaches it, under a name the source reading cannot follow
    (judge/scan/files.py names it instead)."""
    import importlib.machinery as m

    suffix = next((x for x in m.SOURCE_SUFFIXES if relative.endswith(x)), None)
    if suffix is None:
        return False
    parts = Path(relative[: -len(suffix)]).parts
    return not all(p.isidentifier() for p in parts)


def _read(impl: Path, limits: Limits) -> dict[str, bytes]:
    """The submission's regular files, sub-packages included ({relative path: bytes}; no links, no caches, no
    compiled modules, no source under a name an import cannot write: only code whose source the grader has read runs).
    Sizes are checked from the directory entries
    before any byte is read (a sparse 2 GB file is refused unread), and at most MAX_FILES files are taken."""
    out, total, budget = {}, 0, limits.submission_mb << 20
    for root, dirs, files in os.walk(impl, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not os.path.islink(os.path.join(root, d)))
        for name in sorted(files):
            path = Path(root, name)
            if compiled(name) or unnamed_source(str(path.relative_to(impl))):
                continue
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            total += info.st_size
            if total > budget:
                raise OSError(f"the submission is larger than {limits.submission_mb} MB")
            if len(out) >= MAX_FILES:
                raise OSError(f"the submission has more than {MAX_FILES} files")
            with open(path, "rb") as f:
                out[str(path.relative_to(impl))] = f.read(info.st_size + 1)[: info.st_size]
    return out


def worker_uid(pid: int) -> int | None:
    """The unique uid a worker of this pid takes as root (None without root): the parent derives it from the pid
    it started, never from anything the worker says."""
    return UID_BASE + pid if os.geteuid() == 0 else None


@dataclass(frozen=True)
class Folders:
    """What the process sandbox works out from the interpreter's folders, the same for every worker of a server, which
    works it out once before it forks any (run/preload.py; 12 ms of path resolution a worker otherwise):
    `free_tmp`, the shared folders (SHARED_TMP) that hold none of the interpreter's, which a worker may replace by empty
    ones; `dirs`, the interpreter's folders as real paths, the outermost only; `blocked`, for each of them, the
    outermost folder on its way that others may not traverse (or None)."""

    free_tmp: tuple[str, ...]
    dirs: tuple[str, ...]
    blocked: dict


@functools.lru_cache(maxsize=1)
def folders() -> Folders:
    needed = [os.path.realpath(p) for p in _needed()]
    free = tuple(d for d in SHARED_TMP if not any(_inside(p, os.path.realpath(d)) for p in needed))
    dirs = tuple(_outermost(p for p in _needed() if p and os.path.isdir(p)))
    return Folders(free, dirs, {d: _blocked_ancestor(d) for d in dirs})


def _inside(real: str, real_dir: str) -> bool:
    """under() of two paths already resolved."""
    return real == real_dir or real.startswith(real_dir + os.sep)


def _needed() -> list[str]:
    """What the worker must still read after the mounts: the interpreter and its packages."""
    import sys
    import sysconfig

    return [sys.prefix, sys.base_prefix, *(sysconfig.get_paths().values()), *[p for p in sys.path if p]]


def under(path: str, directory: str) -> bool:
    return os.path.realpath(path) == os.path.realpath(directory) or \
        os.path.realpath(path).startswith(os.path.realpath(directory) + os.sep)


def scratch_dir() -> str:
    """A fresh directory for one worker's private copy, made by the parent (which removes it)."""
    return tempfile.mkdtemp(prefix="attnkit-submission-")


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _own_mounts():
    """This process in a mount namespace of its own, its mounts private (none propagates back); returns libc. NoMounts
    where the process may not (root without the right to mount)."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        code = ctypes.get_errno()
        raise (NoMounts if code == errno.EPERM else OSError)(code, "unshare(CLONE_NEWNS) failed")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making mounts private failed")
    return libc


def _outermost(paths) -> list[str]:
    """The real paths of `paths`, sorted, without those inside another of them."""
    dirs = sorted({os.path.realpath(p) for p in paths})
    return [d for d in dirs if not any(d != o and under(d, o) for o in dirs)]


def _private_mounts(hidden: list[str], scratch, writable: list[str]) -> None:
    """Shared temporary directories become private and empty, then kit paths empty and read-only
    (the order matters: a kit inside /tmp is then simply gone)."""
    libc = _own_mounts()
    for paths, flags, options in ((scratch, 0, b"size=64m,mode=1777"), (hidden, MS_RDONLY, b"size=1m,mode=0555")):
        for path in paths:
            if os.path.isdir(path) and libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags, options) != 0:
                raise OSError(ctypes.get_errno(), f"hiding {path} failed")
    _reachable(libc, writable)


def _reachable(libc, writable=()) -> None:
    """Make the interpreter and its packages readable to the unprivileged uid the worker is about to take.

    A needed directory behind an ancestor that others may not traverse (pyenv's Python under /root, 0700; a
    virtual environment in a 0700 clone) is reached through a fresh 0755 tmpfs over that ancestor, holding
    read-only bind mounts of the needed directories alone: nothing else of the ancestor is visible. The
    `writable` directories (the worker's scratch directory, in a private TMPDIR) are bound the same way,
    writable."""
    known = folders()
    rw = {os.path.realpath(p) for p in writable}
    dirs = _outermost([*known.dirs, *(p for p in writable if p and os.path.isdir(p))])
    by_ancestor: dict[str, list[str]] = {}
    for d in dirs:
        blocked = known.blocked[d] if d in known.blocked else _blocked_ancestor(d)
        if blocked:
            by_ancestor.setdefault(blocked, []).append(d)
    for ancestor, inside in by_ancestor.items():
        fds = {d: os.open(d, os.O_PATH | os.O_DIRECTORY) for d in inside}  # held across the tmpfs mount
        try:
            if libc.mount(b"tmpfs", ancestor.encode(), b"tmpfs", 0, b"size=1m,mode=0755") != 0:
                raise OSError(ctypes.get_errno(), f"covering {ancestor} failed")
            for d, fd in fds.items():
                os.makedirs(d, mode=0o755, exist_ok=True)
                if libc.mount(f"/proc/self/fd/{fd}".encode(), d.encode(), None, MS_BIND | MS_REC, None) != 0:
                    raise OSError(ctypes.get_errno(), f"binding {d} failed")
                if d not in rw:
                    libc.mount(None, d.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
        finally:
            for fd in fds.values():
                os.close(fd)


def _blocked_ancestor(path: str) -> str | None:
    """The outermost directory on the way to `path` (itself included) that others may not traverse."""
    parts = Path(path).parts
    for i in range(2, len(parts) + 1):
        d = os.path.join(*parts[:i])
        if not os.stat(d).st_mode & 0o001:
            return d
    return None


def _limit(limits: Limits) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too much output: a write error, not a kill
    for name, value in (("RLIMIT_CPU", limits.cpu_seconds), ("RLIMIT_DATA", limits.memory_mb << 20),
                        ("RLIMIT_FSIZE", limits.output_kb << 10), ("RLIMIT_NPROC", limits.processes),
                        ("RLIMIT_CORE", 0)):
        if name == "RLIMIT_NPROC" and os.getuid() != 0 and os.getuid() < UID_BASE:
            continue  # per-uid: only meaningful for our own unique uid
        resource.setrlimit(getattr(resource, name), (value, value))


def kill_all(uid: int | None, pgid: int | None) -> None:
    """Kill every process the worker left: by its unique uid (root), else by its process group."""
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    if uid is None:
        return
    for _ in range(50):
        found = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/status") as f:
                    uids = next(line for line in f if line.startswith("Uid:")).split()[1:]
                if str(uid) in uids:
                    found = True
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, StopIteration, ValueError):
                continue
        if not found:
            return
        time.sleep(0.02)
