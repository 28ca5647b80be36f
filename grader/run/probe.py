"""The NumPy problem's import check: a fresh Python (no torch loaded) imports the module inside
the same sandbox as a worker and reports every torch module that import asked for. A finder
placed first on sys.meta_path sees each such request (direct, or through any other module)
and refuses it, so the answer does not depend on torch being importable inside the sandbox."""
from __future__ import annotations

import dataclasses
import json
import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

from ..files import remove_tree
from .inbox import Malformed, clean, json_line
from .jail import Sandbox, command, python
from .sandbox import UID_BASE, Limits, chown_tree, copy_submission, hidden_paths, kill_all, scratch_dir, worker_uid

BOOTSTRAP = """
import importlib, json, os, sys, types
import numpy  # noqa: F401 - loaded before the sandbox, whose uid may not read the interpreter's files
from PACKAGE.run import sandbox

impl, module, limits, hide, scratch, fd, jailed, symbol, call_args = json.loads(sys.argv[1])
out = os.fdopen(fd, "w", buffering=1)
uid = sys.stdin.readline().strip()  # jailed as root: the uid the parent chose for this sandbox
nonce = sys.stdin.readline().strip()  # known to the parent only; every line to it carries it
sys.stdin.close()
if uid:
    os.setgroups([])
    os.setgid(int(uid))
    os.setuid(int(uid))
    sandbox.dumpable()


def tell(kind, detail=""):
    out.write(json.dumps([nonce, kind, detail]) + "\\n")
    out.flush()


class Watch:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] == "torch":
            tell("torch", name)  # written before the learner's code runs on: it cannot be taken back
            raise ModuleNotFoundError("attnkit: " + name + " may not be imported by this problem")
        return None


sys.meta_path.insert(0, Watch)
limits = sandbox.Limits(**limits)
work, _ = sandbox.enter_jailed(sandbox.SUBMISSION, limits) if jailed else sandbox.enter(impl, limits, hide, scratch)
tell("start")
package = types.ModuleType("attnkit_submission")
package.__path__ = [work]
sys.modules["attnkit_submission"] = package
try:
    importlib.import_module("attnkit_submission." + module)
except BaseException as exc:
    tell("error", (type(exc).__name__ + ": " + str(exc))[:300])
    raise SystemExit(0)
tell("imported")
if symbol:  # one call, torch absent or watched: a function that needs torch at call time fails or asks here
    def arg(a):
        return numpy.asarray(a["array"], dtype=a["dtype"]) if isinstance(a, dict) else a

    tell("calling")  # a torch request said after this line came from the call
    try:
        got = getattr(sys.modules["attnkit_submission." + module], symbol)(*[arg(a) for a in call_args])
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        said = [{"shape": list(numpy.shape(o)), "data": numpy.asarray(o, dtype="float64").ravel().tolist()} for o in got]
    except BaseException as exc:
        tell("raised", (type(exc).__name__ + ": " + str(exc))[:300])
        raise SystemExit(0)
    tell("returned", json.dumps(said))
"""


def fresh_import(impl: str, module: str, limits: Limits | None, timeout: float, jailed: bool = False,
                 symbol: str | None = None, args: list | None = None) -> dict:
    """A worker-style result: {"ok": True, "modules": [...], "called": ...} or {"ok": False, "error": {...}}.
    `symbol` and `args` (arrays as {"array": nested lists, "dtype": name}): the function is called once after the
    import, and "called" says what came back ({"outputs": [{"shape", "data"}]}) or what it raised ({"error": text}).

    The probe reports on a pipe of its own, each line carrying a nonce it read from stdin before any learner
    code ran (printing a result line proves nothing), and a request for torch is written the moment it is
    made, before the learner's code runs on: a line that says torch was asked for cannot be taken back.
    `jailed`: inside bubblewrap, where torch's directory is an empty one (jail.py)."""
    scratch = scratch_dir()
    nonce = secrets.token_hex(16)
    limits = limits or Limits()
    read_end, write_end = os.pipe()
    hide = hidden_paths() + ([_torch_dir()] if symbol and not jailed else [])  # as root: torch's folder empty too
    args = json.dumps([impl, module, dataclasses.asdict(limits), hide, scratch, write_end, jailed, symbol, args or []])
    here = Path(__file__).resolve().parent.parent  # the package, imported by its folder's name (whatever name
    boot = BOOTSTRAP.replace("PACKAGE", __package__.split(".")[0] if jailed else here.name)  # this process uses)
    if jailed:
        try:
            copy_submission(impl, limits, scratch)
        except OSError as exc:
            remove_tree(scratch)
            os.close(read_end)
            os.close(write_end)
            why = f"the grader could not sandbox this submission ({exc})"
            return {"ok": False, "error": {"type": "ImportError", "text": why, "message": why, "value_error": False}}
        argv = command(scratch, hide=(_torch_dir(),)) + python(boot, args)
    else:
        argv = [sys.executable, "-I", "-B", "-c", f"import sys; sys.path.insert(0, {str(here.parent)!r})\n" + boot, args]
    popen = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.PIPE, text=True)
    box = Sandbox(argv, pass_fds=(write_end,), **popen) if jailed else None
    proc = box.proc if jailed else subprocess.Popen(argv, pass_fds=(write_end,), **popen)
    os.close(write_end)
    uid = UID_BASE + proc.pid if jailed and os.geteuid() == 0 else None
    if uid is not None:
        chown_tree(scratch, uid)
    lines: list = []
    reader = threading.Thread(target=_collect, args=(read_end, lines), daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.stdin.write(f"{uid or ''}\n{nonce}\n")
        proc.stdin.close()
        proc.wait(timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        timed_out = True
    finally:
        if jailed:
            box.kill()  # the namespace, and everything in it; then, as root, its uid
            kill_all(uid, None)  # (bwrap leads no process group: its pid is no group to kill)
        else:
            kill_all(worker_uid(proc.pid), proc.pid)  # from the pid we started: nothing the probe said
            proc.wait()
        reader.join(5)
        remove_tree(scratch)
    said = [(kind, detail) for n, kind, detail in lines if n == nonce]
    torch_asked = sorted({detail for kind, detail in said if kind == "torch"})
    if torch_asked:
        calling = next((i for i, (kind, _) in enumerate(said) if kind == "calling"), len(said))
        first = next(i for i, (kind, _) in enumerate(said) if kind == "torch")
        return {"ok": True, "modules": torch_asked, "when": "call" if first > calling else "import"}
    if ("imported", "") in said:
        return {"ok": True, "modules": [], "called": _called(said, symbol, timed_out, timeout)}
    error = next((detail for kind, detail in said if kind == "error"), None)
    why = clean(error or (f"importing {module}.py did not finish within {timeout:g} s" if timed_out
                          else f"the fresh interpreter exited with code {proc.returncode} before reporting"))
    return {"ok": False, "error": {"type": "ImportError", "text": why, "message": why, "value_error": False}}


def _called(said: list, symbol: str | None, timed_out: bool, timeout: float) -> dict | None:
    """What the probe's one call gave: {"outputs": [...]}, {"error": text}, or None where none was asked."""
    if not symbol:
        return None
    for kind, detail in said:
        if kind == "returned":
            try:
                outputs = json.loads(detail)
            except ValueError:
                break
            if isinstance(outputs, list) and all(isinstance(o, dict) and isinstance(o.get("shape"), list)
                                                 and isinstance(o.get("data"), list) for o in outputs):
                return {"outputs": outputs}
            break
        if kind == "raised":
            return {"error": clean(detail)}
    return {"error": f"the call did not finish within {timeout:g} s" if timed_out else "the call reported nothing"}


def _torch_dir() -> str:
    import torch

    return os.path.dirname(os.path.realpath(torch.__file__))


def _collect(fd: int, lines: list, limit: int = 1 << 20) -> None:
    """Read the probe's pipe to its end (at most `limit` bytes); keep the well-formed lines."""
    data = b""
    with os.fdopen(fd, "rb") as f:
        while len(data) < limit:
            chunk = f.read(65536)
            if not chunk:
                break
            data += chunk
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            item = json_line(line)
        except Malformed:
            continue
        if isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item):
            lines.append(item)
