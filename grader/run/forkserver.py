"""Where workers come from: a multiprocessing forkserver that preloads torch and the worker code.

Kept free of heavy imports, so that `warm_up()` can start the forkserver before the caller
imports torch: the two imports then run in parallel on two cores.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import sys
import types


def context():
    if "forkserver" not in mp.get_all_start_methods():  # Windows: spawned workers import torch themselves
        return mp.get_context("spawn")
    _short_socket_folder()
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([f"{__package__}.preload"])
    return ctx


def warm_up() -> None:
    """Start the forkserver now; idempotent, and it returns without waiting for the preload."""
    if context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


SOCKET_ROOM = 40
"""Characters multiprocessing adds to the temporary directory for the forkserver's socket ("/pymp-XXXXXXXX/listener-
XXXXXXXX" and some to spare); a socket's path holds at most 107 (AF_UNIX)."""


def _short_socket_folder() -> None:
    """Where the temporary directory is too long for a socket under it (a TMPDIR deep in a project or a CI
    workspace), multiprocessing's folder is made under /tmp (or /var/tmp) instead, as Python 3.13's multiprocessing
    does itself; without it the forkserver cannot listen ("AF_UNIX path too long") and no grading can start. Made
    and removed at exit exactly as multiprocessing.util.get_temp_dir makes and removes its own."""
    import os
    import shutil
    import tempfile
    from multiprocessing import process, util

    config = process.current_process()._config
    if config.get("tempdir") is not None or len(tempfile.gettempdir()) + SOCKET_ROOM <= 107:
        return
    for base in ("/tmp", "/var/tmp"):
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            folder = tempfile.mkdtemp(prefix="pymp-", dir=base)
            util.Finalize(None, util._remove_temp_dir, args=(shutil.rmtree, folder), exitpriority=-100)
            config["tempdir"] = folder
            return


@contextlib.contextmanager
def bare_main():
    """Start processes as if `__main__` were empty: multiprocessing would otherwise re-import the
    caller's main module (a script, pytest, a Jupyter kernel) in every worker."""
    real = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = real


def stop() -> None:
    """Stop the forkserver and multiprocessing's resource tracker (both restart on demand).
    Jupyter kernels need this: at shutdown ipykernel interrupts its children and waits for them,
    and both ignore SIGINT by design, which would cost every kernel seconds."""
    import os
    import signal
    from multiprocessing import forkserver, resource_tracker

    # The forkserver holds nothing to flush (its workers are closed by then); killed, it skips the half second
    # that an interpreter with torch loaded spends shutting down, which _stop() below would wait for.
    pid = _server_pid()
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    # Each module keeps one instance and offers no public way to stop it. Stopping waits for the process to exit; the
    # resource tracker exits when every holder of its pipe has closed it, and a worker still dying (Ctrl-C reaches the
    # whole process group) may hold it a while: past a few seconds it is killed, so that the command never hangs.
    import threading

    for server, attr in ((forkserver._forkserver, "_forkserver_pid"), (resource_tracker._resource_tracker, "_pid")):
        pid = getattr(server, attr, None)
        if pid is None or not hasattr(server, "_stop"):
            continue
        stopping = threading.Thread(target=server._stop, daemon=True)
        stopping.start()
        stopping.join(STOP_WAIT)
        if stopping.is_alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            stopping.join(STOP_WAIT)


STOP_WAIT = 5.0
"""Seconds a stopping server may take to exit before it is killed."""


def running() -> bool:
    """Whether this process's forkserver has been started (warm_up): processes from it start in milliseconds."""
    return context().get_start_method() == "forkserver" and _server_pid() is not None


def _server_pid() -> int | None:
    """The forkserver's pid while it runs (multiprocessing keeps it on its one instance, with no public accessor)."""
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)
