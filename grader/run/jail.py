"""bubblewrap (`bwrap`, Flatpak's sandbox): each graded submission in a sandbox of its own.

One `bwrap` per submission: new PID, network, IPC and UTS namespaces and a new session; a root made
of read-only binds of the system libraries and the interpreter's directories alone (the kit's
repository, the reference solutions and the grader's own files are not in it: the few worker-side
modules are bound file by file); a private /tmp holding the submission's private copy; no
environment but what we set. As root, bwrap runs privileged and the server inside drops to a
unique unprivileged uid the parent chose; otherwise bwrap makes a user namespace. Inside,
`jail_server` imports torch once and forks one worker per problem. `Sandbox.kill` kills the
namespace's first process, and the kernel then kills everything the submission started.
"""
from __future__ import annotations

import functools
import json
import os
import select
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from ..errors import BadInput
from ..extensions import VARIABLE, worker_files
from .sandbox import SUBMISSION, under, hidden_paths

WORKER_MODULES = ("__init__", "extensions", "run/__init__", "run/collector", "run/harness", "run/heap", "run/intercept", "run/jail_server",
                  "run/no_autograd", "run/kernels", "run/kernel_launch", "run/kernel_watch", "run/kernel_compile",
                  "run/limits", "run/loader", "run/sandbox", "run/syscalls", "run/wire", "run/worker", "run/hooks/__init__")
"""All a worker imports, bound one by one; and every worker hook (run/hooks/*.py, `worker_modules()`)."""
PACKAGE = __name__.split(".")[0]
CODE_DIR = "/attnkit-worker"  # where the worker modules appear inside
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime")
INSTALL = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
NOT_INSTALLED = "bwrap is not installed"
NAMESPACES = ("bwrap is installed, but this machine refuses it the namespaces it needs (as root: the right to mount, "
              "which a Docker container with its default seccomp profile lacks; without root: unprivileged user "
              "namespaces): allow them, or grade elsewhere (docs/security.md, Untrusted submissions)")
MODES = ("auto", "bwrap", "off")
TMP_BYTES = 64 << 20  # the private /tmp


def worker_modules(code: Path) -> tuple[str, ...]:
    """WORKER_MODULES and the hook modules beside them (each hook a file of run/hooks/)."""
    return WORKER_MODULES + tuple(f"run/hooks/{p.stem}" for p in sorted((code / "run" / "hooks").glob("*.py"))
                                  if p.stem != "__init__")


def namespaces() -> list[str]:
    user = [] if os.geteuid() == 0 else ["--unshare-user"]  # as root: privileged, and the server drops to a uid
    return ["bwrap", *user, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"]


@functools.lru_cache(maxsize=1)
def unusable() -> str | None:
    """Why bwrap cannot sandbox here (not installed, no namespaces allowed), or None when it can."""
    try:
        done = subprocess.run([*namespaces(), "--ro-bind", "/", "/", "--proc", "/proc", "true"],
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return NOT_INSTALLED
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run ({exc})"
    if done.returncode != 0:
        return f"bwrap cannot make namespaces here ({done.stderr.strip()[:200] or done.returncode})"
    return None


def _wanted(sandbox: bool | None) -> bool | None:
    """`sandbox` read with $ATTNKIT_SANDBOX: False (never), True (required) or None (whenever usable)."""
    if sandbox is not None:
        return sandbox
    mode = os.environ.get("ATTNKIT_SANDBOX", "auto")
    if mode not in MODES:
        raise BadInput(f"ATTNKIT_SANDBOX={mode!r}: expected one of {', '.join(MODES)}")
    return {"off": False, "bwrap": True, "auto": None}[mode]


def likely(sandbox: bool | None = None) -> bool:
    """Whether decide(sandbox) would grade inside bwrap, without its notice or its error: a spare sandbox is worth
    starting before the rest of a command is known."""
    try:
        return _wanted(sandbox) is not False and unusable() is None
    except BadInput:  # said by decide, in its turn
        return False


def decide(sandbox: bool | None) -> bool:
    """Whether to grade inside bwrap. True: required (a clear error when unusable); False: never;
    None: $ATTNKIT_SANDBOX (auto, the default: whenever usable, else a one-line notice; bwrap: required; off)."""
    sandbox = _wanted(sandbox)
    if sandbox is False:
        return False
    why = unusable()
    if why is None:
        return True
    if sandbox:
        raise BadInput(f"untrusted grading needs the OS sandbox, and {why}: {remedy(why)}")
    _notice(why)
    return False


def remedy(why: str) -> str:
    """What to do about `why` (unusable's answer): install bwrap where it is missing, else allow its namespaces."""
    return INSTALL if why == NOT_INSTALLED else NAMESPACES


@functools.lru_cache(maxsize=1)
def _notice(why: str) -> None:
    sys.__stderr__.write(f"attnkit: note: grading without the OS sandbox ({why}); fine for your own code, "
                         f"not for others' (see docs/security.md)\n")


def command(scratch: str, hide: tuple[str, ...] = ()) -> list[str]:
    """bwrap's command line up to the program: the submission copy `scratch` at SUBMISSION (writable),
    the interpreter read-only, `hide` (and the kit's own paths) covered by empty read-only directories."""
    args = namespaces() + ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in SYSTEM_FILES:
        args += ["--ro-bind-try", path, path]
    dirs = python_dirs()
    for ancestor in sorted({str(a) for d in dirs for a in Path(d).parents if str(a) != "/"} - set(SYSTEM)):
        args += ["--perms", "0755", "--dir", ancestor]  # made by bwrap, traversable whatever the host's modes
    for d in dirs:
        args += ["--ro-bind", d, d]
    for path in [*hidden_paths(), *hide]:
        if any(under(path, d) for d in [*dirs, *SYSTEM]):
            args += ["--tmpfs", path, "--remount-ro", path]
    code = Path(__file__).resolve().parent.parent  # the package's folder
    for name in worker_modules(code):
        args += ["--ro-bind", str(code / f"{name}.py"), f"{CODE_DIR}/{PACKAGE}/{name}.py"]
    extensions = worker_files()  # extensions' hook modules (grader/extensions.py), bound the same way
    for package, files in extensions.items():
        root = files[0].parent
        for f in files:
            args += ["--ro-bind", str(f), f"{CODE_DIR}/{package}/{f.relative_to(root).as_posix()}"]
    if extensions:
        args += ["--setenv", VARIABLE, ",".join(extensions)]
    args += _gpu()
    args += ["--bind", scratch, SUBMISSION, "--chdir", SUBMISSION]
    for key, value in (("PATH", "/usr/bin:/bin"), ("LANG", "C.UTF-8"), ("OMP_NUM_THREADS", "1"),
                       ("PYTHONDONTWRITEBYTECODE", "1"), ("HOME", SUBMISSION)):
        args += ["--setenv", key, value]
    return args


def python(code: str, *argv: str) -> list[str]:
    """The interpreter inside, running `code` with the worker modules importable."""
    boot = f"import sys; sys.path.insert(0, {CODE_DIR!r}); {code}"
    return [sys.executable, "-I", "-B", "-c", boot, *argv]


@functools.lru_cache(maxsize=1)
def python_dirs() -> tuple[str, ...]:
    """The interpreter's directories (outermost only): its prefixes, standard library, site-packages and the
    library folders on sys.path, never the kit's checkout or a directory holding it (a virtual environment
    inside the checkout is fine), nor a shared temporary directory itself."""
    from .. import ROOT

    import site

    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), *sysconfig.get_paths().values(),
             *site.getsitepackages(), site.getusersitepackages(), *_library_paths()}
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}
    dirs = {os.path.realpath(p) for p in found if p and os.path.isdir(p)}
    dirs = {d for d in dirs if d != "/" and not any(under(d, s) for s in SYSTEM)
            and (not under(str(ROOT), d) or d in prefixes)  # holding the checkout: only as the interpreter's own
            and (not under(d, str(ROOT)) or any(under(d, p) for p in prefixes))}  # inside it: only a venv
    return tuple(sorted(d for d in dirs if not any(d != o and under(d, o) for o in dirs)))


def _library_paths() -> list[str]:
    """sys.path's folders (those .pth files add), less the script's folder or working directory at its head."""
    head = {"", os.getcwd(), os.path.dirname(os.path.realpath(sys.argv[0])) if sys.argv and sys.argv[0] else ""}
    paths = sys.path[1:] if sys.path and sys.path[0] in head else sys.path
    shared = ("/", "/tmp", "/var/tmp", "/dev/shm", "/home", "/root")
    return [p for p in paths if p and os.path.realpath(p) not in shared]


def _gpu() -> list[str]:
    """NVIDIA's device files and /sys, read-only, where the host has them (CUDA needs both)."""
    devices = sorted(str(p) for p in Path("/dev").glob("nvidia*"))
    if not devices:
        return []
    return [a for d in devices for a in ("--dev-bind", d, d)] + ["--ro-bind", "/sys", "/sys"]


class Sandbox:
    """A started bwrap, and the one sure way to end it: kill the namespace's first process.

    bwrap reports that process (its child, in our PID namespace) on --info-fd before any sandboxed code
    runs; we hold it by a pidfd, so the signal cannot reach a reused pid. Killing bwrap alone is not
    enough: --die-with-parent does not reliably take the namespace's first process with it (measured:
    as root, it outlived bwrap with every process under it)."""

    def __init__(self, argv: list[str], pass_fds=(), **popen):
        info_read, info_write = os.pipe()
        argv = [argv[0], "--info-fd", str(info_write), *argv[1:]]
        try:
            self.proc = subprocess.Popen(argv, pass_fds=(*pass_fds, info_write), **popen)
        finally:
            os.close(info_write)
        self.info, self.pidfd, self.child_pid = info_read, None, None

    def _first_process(self, timeout: float) -> None:
        """Hold the namespace's first process by a pidfd (bwrap writes its pid at once; EOF if it failed)."""
        if self.pidfd is not None or self.info is None:
            return
        data = b""
        end = time.monotonic() + timeout
        while b"}" not in data and time.monotonic() < end:
            ready, _, _ = select.select([self.info], [], [], max(0.0, end - time.monotonic()))
            chunk = os.read(self.info, 4096) if ready else b""
            if ready and not chunk:
                break
            data += chunk
        try:
            self.child_pid = int(json.loads(data)["child-pid"])
            self.pidfd = os.pidfd_open(self.child_pid)
        except (ValueError, KeyError, TypeError, OSError):
            pass
        finally:
            os.close(self.info)
            self.info = None

    def host_pid(self, ns_pid: int) -> int:
        """The pid, as seen here, of the process that is `ns_pid` inside the sandbox's PID namespace (read from
        /proc: NSpid, and the namespace of the sandbox's first process). LookupError if there is none."""
        if type(ns_pid) is not int or self.child_pid is None:
            raise LookupError("no such process in the sandbox")
        ns = os.readlink(f"/proc/{self.child_pid}/ns/pid")
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as f:
                    nspid = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
                if len(nspid) > 1 and nspid[-1] == str(ns_pid) and os.readlink(f"/proc/{entry}/ns/pid") == ns:
                    return int(entry)
            except (OSError, StopIteration):
                continue
        raise LookupError("no such process in the sandbox")

    def started(self, timeout: float = 10.0) -> None:
        """Call once bwrap has had a moment to start (before it can have exited)."""
        if self.proc.poll() is None:
            self._first_process(timeout)

    def kill(self) -> None:
        """Kill the namespace's first process (the kernel then kills every process in the namespace), then bwrap."""
        self.started(1.0)
        if self.info is not None:  # bwrap ended before it was read: nothing left to hold
            os.close(self.info)
            self.info = None
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:
                pass
            os.close(self.pidfd)
            self.pidfd = None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
