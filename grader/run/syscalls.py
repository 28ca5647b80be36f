"""The system calls a worker may not make, refused by the kernel itself (seccomp, through libseccomp's filter builder).

Workers of one submission run side by side, and a worker's code is the learner's: without these rules one problem's
worker could serve another's over a socket (compute its answers with a banned call, or its memory), signal or trace a
sibling, or read its memory. A filter, once loaded, holds for the process and every process it starts, and no code of
its own can lift it (no_new_privileges is set first, as the kernel requires of an unprivileged process):

  socket(2)                                       refused for every address family (none is needed after the
                                                  worker's own connection exists: loopback, a Unix socket in a shared
                                                  folder, netlink, and the host network with the process sandbox);
  kill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo  only to the worker itself (its own pid: abort() and raise() still
                                                  work; its children, other workers and the grader are refused);
  tkill, pidfd_open, pidfd_send_signal, pidfd_getfd  refused;
  ptrace, process_vm_readv, process_vm_writev     refused;
  System V and POSIX message queues, semaphores and shared memory (shmget, msgget, semget, mq_open and their use)
                                                  refused: IPC objects another worker could open by key or name;
  execve, execveat                                refused (`programs` False, every stage but the kernels stage's):
                                                  a fresh interpreter the worker started would hold none of its
                                                  refusals (the banned functions, autograd); forked children keep them.
                                                  The kernels stage's workers compile kernels in a child interpreter
                                                  (run/kernel_compile.py), so there a program may start.

Refused calls fail with EPERM (EACCES for socket), as a restrictive system would make them fail: the learner's code sees
an error it can report, never a killed process the grader would have to explain.
"""
from __future__ import annotations

import errno
import os
import sys

try:  # loaded once where the module is imported (the workers' server's preload): libseccomp is found by ctypes there,
    import pyseccomp  # not in each sandboxed worker, whose environment and paths are cut down
except (ImportError, OSError) as exc:
    pyseccomp, MISSING = None, exc

REFUSED = ("tkill", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "ptrace", "process_vm_readv",
           "process_vm_writev", "shmget", "shmat", "msgget", "msgsnd", "msgrcv", "semget", "semop", "semtimedop",
           "mq_open", "mq_timedsend", "mq_timedreceive", "mq_notify")
TO_SELF_ONLY = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # the target pid is the first argument


class Unconfined(RuntimeError):
    """The filter could not be loaded (no libseccomp, or a kernel without seccomp): the worker must not run learner
    code (fail closed)."""


PROGRAMS = ("execve", "execveat")


def confine(programs: bool = False) -> None:
    """Load this process's filter (before any learner code runs): on Linux, where seccomp is; elsewhere nothing (the
    process sandbox there holds what docs/security.md says). `programs`: whether the process may still start programs
    (execve). Raises Unconfined where it cannot on Linux."""
    if not sys.platform.startswith("linux"):
        return
    if pyseccomp is None:
        raise Unconfined(f"libseccomp cannot be loaded ({MISSING}): install the system's libseccomp2 and the pyseccomp "
                         "package")
    sc = pyseccomp

    own = os.getpid()
    try:
        f = sc.SyscallFilter(sc.ALLOW)
        f.add_rule(sc.ERRNO(errno.EACCES), "socket")
        for name in REFUSED + (() if programs else PROGRAMS):
            _refuse(sc, f, name)
        for name in TO_SELF_ONLY:
            _refuse(sc, f, name, sc.Arg(0, sc.NE, own))
        f.load()
    except (OSError, RuntimeError, ValueError) as exc:
        raise Unconfined(f"the system call filter could not be loaded ({exc})") from None


def _refuse(sc, f, name: str, *args) -> None:
    """EPERM for `name` (under `args`), where this kernel and libseccomp know the call (an older one lacks pidfd_getfd:
    nothing to refuse there)."""
    try:
        if sc.resolve_syscall(sc.system_arch(), name) == -1:  # __NR_SCMP_ERROR: a name libseccomp does not know
            return
    except (OSError, ValueError):
        return
    f.add_rule(sc.ERRNO(errno.EPERM), name, *args)
