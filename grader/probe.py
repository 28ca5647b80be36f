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

from .files import remove_tree
from .inbox import clean
from .sandbox import Limits, hidden_paths, kill_all, scratch_dir, worker_uid

BOOTSTRAP = """
import importlib, json, os, sys, types
import numpy  # noqa: F401 - loaded before the sandbox, whose uid may not read the interpreter's files
from grader import sandbox

impl, module, limits, hide, scratch, fd = json.loads(sys.argv[1])
out = os.fdopen(fd, "w", buffering=1)
nonce = sys.stdin.readline().strip()  # known to the parent only; every line to it carries it
sys.stdin.close()


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
work, uid = sandbox.enter(impl, sandbox.Limits(**limits), hide, scratch)
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
"""


def fresh_import(impl: str, module: str, limits: Limits | None, timeout: float) -> dict:
    """A worker-style result: {"ok": True, "modules": [...]} or {"ok": False, "error": {...}}.

    The probe reports on a pipe of its own, each line carrying a nonce it read from stdin before any learner
    code ran (printing a result line proves nothing), and a request for torch is written the moment it is
    made, before the learner's code runs on: a line that says torch was asked for cannot be taken back."""
    scratch = scratch_dir()
    nonce = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    args = json.dumps([impl, module, dataclasses.asdict(limits or Limits()), hidden_paths(), scratch, write_end])
    proc = subprocess.Popen([sys.executable, "-I", "-B", "-c", BOOTSTRAP, args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.PIPE, text=True, pass_fds=(write_end,))
    os.close(write_end)
    lines: list = []
    reader = threading.Thread(target=_collect, args=(read_end, lines), daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.stdin.write(nonce + "\n")
        proc.stdin.close()
        proc.wait(timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        timed_out = True
    finally:
        kill_all(worker_uid(proc.pid), proc.pid)  # from the pid we started: nothing the probe said
        proc.wait()
        reader.join(5)
        remove_tree(scratch)
    said = [(kind, detail) for n, kind, detail in lines if n == nonce]
    torch_asked = sorted({detail for kind, detail in said if kind == "torch"})
    if torch_asked:
        return {"ok": True, "modules": torch_asked}
    if ("imported", "") in said:
        return {"ok": True, "modules": []}
    error = next((detail for kind, detail in said if kind == "error"), None)
    why = clean(error or (f"importing {module}.py did not finish within {timeout:g} s" if timed_out
                          else f"the fresh interpreter exited with code {proc.returncode} before reporting"))
    return {"ok": False, "error": {"type": "ImportError", "text": why, "message": why, "value_error": False}}


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
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item):
            lines.append(item)
