"""The NumPy problem's import check: a fresh Python (no torch loaded) imports the module inside
the same sandbox as a worker and reports every torch module that import asked for. A finder
placed first on sys.meta_path sees each such request (direct, or through any other module)
and refuses it, so the answer does not depend on torch being importable inside the sandbox."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

from .files import remove_tree
from .inbox import clean
from .sandbox import Limits, hidden_paths, kill_all, scratch_dir, worker_uid

MARK = "attnkit-probe:"
BOOTSTRAP = f"""
import importlib, json, sys, types
import numpy  # noqa: F401 - loaded before the sandbox, whose uid may not read the interpreter's files
from grader import sandbox


class Watch:
    seen = []

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            cls.seen.append(name)
            raise ModuleNotFoundError("attnkit: " + name + " may not be imported by this problem")
        return None


sys.meta_path.insert(0, Watch)
impl, module, limits, hide, scratch = json.loads(sys.argv[1])
work, uid = sandbox.enter(impl, sandbox.Limits(**limits), hide, scratch)
print("{MARK}" + json.dumps({{"uid": uid}}), flush=True)
package = types.ModuleType("attnkit_submission")
package.__path__ = [work]
sys.modules["attnkit_submission"] = package
try:
    importlib.import_module("attnkit_submission." + module)
except BaseException as exc:
    if not Watch.seen:
        print("{MARK}" + json.dumps({{"error": (type(exc).__name__ + ": " + str(exc))[:300]}}), flush=True)
        raise SystemExit(0)
print("{MARK}" + json.dumps({{"modules": sorted(set(Watch.seen))}}), flush=True)
"""


def fresh_import(impl: str, module: str, limits: Limits | None, timeout: float) -> dict:
    """A worker-style result: {"ok": True, "modules": [...]} or {"ok": False, "error": {...}}."""
    scratch = scratch_dir()
    args = json.dumps([impl, module, dataclasses.asdict(limits or Limits()), hidden_paths(), scratch])
    proc = subprocess.Popen([sys.executable, "-I", "-B", "-c", BOOTSTRAP, args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)  # enter() calls setsid
    found: dict = {}
    try:
        out, _ = proc.communicate(timeout=timeout)
        for line in out.splitlines():
            if line.startswith(MARK):
                found.update(json.loads(line[len(MARK):]))
    except subprocess.TimeoutExpired:
        found["error"] = f"importing {module}.py did not finish within {timeout:g} s"
    finally:
        kill_all(worker_uid(proc.pid), proc.pid)  # from the pid we started: nothing the probe printed
        proc.wait()
        remove_tree(scratch)
    if "modules" in found:
        return {"ok": True, "modules": found["modules"]}
    why = clean(str(found.get("error") or f"the fresh interpreter exited with code {proc.returncode}"))
    return {"ok": False, "error": {"type": "ImportError", "text": why, "message": why, "value_error": False}}
