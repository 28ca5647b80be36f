"""Inside a submission's bubblewrap sandbox: import torch once, fork one worker per problem, report exits.

Started by `jail_process.Jail` (possibly before the submission is known: a warm spare). The parent
then sends one message on the control socket (SOCK_SEQPACKET): JSON {"worker_uids": [...] (as root) or [],
"limits": {...}, "workers": [[module, symbol], ...]} with, per worker, its socket and its log file as passed
descriptors. Started as root, the server stays root and each worker takes the uid the parent chose for it
("worker_uids"), with a /tmp of its own and the submission read-only, before any learner code runs
(sandbox.enter_jailed); without root, the workers share the server's user. It reports {"exit": i, "code": c} per
worker and obeys {"kill": i}. Nothing here is trusted by the parent beyond its own submission.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import threading
from multiprocessing.connection import Connection

MAX_MESSAGE = 1 << 16


def main(control_fd: int) -> None:
    from .collector import pause, settle

    pause()  # no collection during torch's import; frozen after it, as the forkserver's preload does
    import torch

    from . import harness, heap, intercept, sandbox, worker, wire  # noqa: F401 - preloaded: every worker inherits them

    intercept.index_functions()  # a worker's bans then search one string (run/intercept.py)
    settle()

    torch.set_num_threads(1)
    control = socket.socket(fileno=control_fd)
    try:
        data, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, 256)
        go = json.loads(data)
    except (OSError, ValueError):
        return
    uids = go.get("worker_uids") or [None] * len(go["workers"])
    if os.geteuid() == 0 and not (len(uids) == len(go["workers"]) and all(type(u) is int for u in uids)):
        return  # started as root: each worker takes a uid of its own (sandbox._apart); none given, none runs
    sandbox.no_new_privileges()
    limits = sandbox.Limits(**go["limits"])
    children = {}
    for i, (module, symbol, *preload) in enumerate(go["workers"]):
        fd, log_fd = fds[2 * i], fds[2 * i + 1]
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                control.close()
                for other in fds[2 * i + 2:]:  # later workers' ends (earlier ones are closed already)
                    os.close(other)
                enter = lambda **kw: sandbox.enter_jailed(sandbox.SUBMISSION, limits, uids[i], **kw)  # noqa: E731
                worker.serve(Connection(fd), log_fd, module, symbol, enter, tuple(preload[0]) if preload else ())
            except BaseException:  # noqa: BLE001 - the worker reports its own failures; this is the last word
                code = 1
            finally:
                os._exit(code)
        children[pid] = i
        os.close(fd)
        os.close(log_fd)
    threading.Thread(target=_obey, args=(control, children), daemon=True).start()
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid in children:
            report = {"exit": children.pop(pid), "code": os.waitstatus_to_exitcode(status)}
            control.send(json.dumps(report).encode())


def _obey(control: socket.socket, children: dict) -> None:
    """Kill the workers the parent gives up on (each leads its own process group)."""
    while True:
        try:
            data = control.recv(MAX_MESSAGE)
            order = json.loads(data) if data else None
        except (OSError, ValueError):
            return
        if order is None:  # the grader is gone: end this server, and with it the sandbox
            os._exit(0)
        for pid, i in list(children.items()):
            if i == order.get("kill"):
                for kill in (os.killpg, os.kill):  # its group once it has made one, else itself
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
