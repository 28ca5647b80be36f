"""The worker side: load the learner's module, run the calls it is sent, stream back results.

A worker never sees expected values: it receives inputs and returns tensors.
"""
from __future__ import annotations

import faulthandler
import os
import sys
from pathlib import Path

from .loader import NotStarted, describe_exception, load_symbol
from .wire import dumps, loads

PACKAGE = "attnkit_submission"


def serve(conn, log, module: str, symbol: str, enter, preload: tuple = ()) -> None:
    """Worker entry point: sandbox (`enter()` -> (the submission copy's path, uid)), hello, read the calls,
    load the module, answer; more batches until None. `log` is the log's path, or an open descriptor. `preload`: the
    packages the problem needs beyond torch (the kernels stage's Triton), imported before the sandbox, whose uid may
    not reach the interpreter's files (a virtual environment under a private folder, as root)."""
    _redirect_output(log)
    import importlib

    import torch

    from . import harness, heap, hooks

    torch.set_num_threads(1)
    cuda = torch.cuda.is_available()
    try:
        for name in preload:
            importlib.import_module(name)
        # the kernels stage (the one stage that preloads a package, Triton) compiles kernels in a child interpreter
        work, _ = enter(programs=bool(preload))
        _cut_off(keep={conn.fileno()})
    except Exception as exc:  # noqa: BLE001 - fail closed: no learner code runs unsandboxed
        conn.send_bytes(dumps({"hello": {"cuda": cuda}}))
        conn.send_bytes(dumps({"loaded": f"the grader could not sandbox this submission ({exc})"}))
        return
    # said before any learner code runs: where the parent knows this process only from inside bwrap, it places it in
    # its memory cgroup by this pid (jail.Sandbox.host_pid) before sending the first batch
    conn.send_bytes(dumps({"hello": {"cuda": cuda, "pid": os.getpid()}}))
    sys.path.append(work)  # lenient: plain `import masked_softmax` works too
    try:
        calls = loads(conn.recv_bytes())  # read the first batch before any learner code runs
    except EOFError:
        return
    first = {}
    for c in calls:  # each hook's first options, set up for the worker's whole life before the learner's import
        for name, options in (c.get("hooks") or {}).items():
            first.setdefault(name, options)
    heap.roomy()  # freed blocks reused, unless a hook measures this worker's memory (its setup says: run/heap.py)
    for h, options in hooks.active({"hooks": first}):
        h.setup(options)
    try:
        target = load_symbol(Path(work), module, symbol, PACKAGE)
    except NotStarted as exc:
        conn.send_bytes(dumps({"loaded": str(exc)}))
        return
    conn.send_bytes(dumps({"loaded": None}))
    while calls is not None:
        for call in calls:
            conn.send_bytes(dumps({"key": call["key"], "result": _run(harness, call, target, work)}))
        calls = None  # the answered batch's tensors are freed before the next one is awaited (and measured)
        try:
            calls = loads(conn.recv_bytes())
        except EOFError:
            return


def _run(harness, call, target, impl_dir) -> dict:
    sys.stdout.flush()
    try:
        return {"ok": True, **harness.execute(call, target, digests=True)}
    except harness.GraderFault as exc:  # the grader's own code failed: never the learner's failure
        error = {"type": "GraderFault", "text": str(exc)[:1000], "message": str(exc)[:500], "value_error": False}
        return {"ok": False, "grader_error": True, "error": error}
    except BaseException as exc:  # noqa: BLE001 - report everything, SystemExit included
        error = {"type": type(exc).__name__, "text": describe_exception(exc, Path(impl_dir)), "message": str(exc)[:500]}
        return {"ok": False, "error": {**error, "value_error": isinstance(exc, ValueError)}}


def _cut_off(keep: set[int]) -> None:
    """Every descriptor the worker inherited beyond its standard streams and `keep` (its connection) pointed at
    /dev/null before any learner code runs: the forkserver's children inherit the ends of pipes to processes outside
    the sandbox (multiprocessing's resource tracker, which runs as the grader's user and unlinks the shared memory
    it is told to, prints what it cannot parse, and holds any line it is sent). Pointed elsewhere rather than closed,
    so that an object still holding a number closes /dev/null, never a file opened later under that number."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc (macOS): the numbers a process usually has
        fds = list(range(3, 256))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in fds:
        if fd > 2 and fd != null and fd not in keep:
            try:
                os.fstat(fd)
            except OSError:  # not open (the listing's own, closed by now)
                continue
            os.dup2(null, fd, inheritable=False)
    os.close(null)


def _redirect_output(log) -> None:
    """The learner's prints go to a log the grader reads back on a crash (a path, or a descriptor to take)."""
    fd = log if isinstance(log, int) else os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    # Inherited sys.stdout may be the parent's capture object (pytest): point at the log instead.
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    faulthandler.enable(file=sys.stderr)  # a crash's Python traceback goes to the log, shown on failure
