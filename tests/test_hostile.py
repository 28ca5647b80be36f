"""Hostile submissions: the grader finishes with a report, the attacked problem scores 0 with a
clear reason, the other problems are graded normally, no file changes, no process survives."""
from __future__ import annotations

import os
import re
import time

import pytest

from conftest import SANDBOXES, SOLUTIONS, make_impl, snapshot, grade_shared
from attnkit import ROOT
from attnkit.problems import all_problems
from attnkit.run.sandbox import Limits

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="hiding files and dropping privileges needs root")
MARKER = "attnkit-hostile-marker"
GUARDED = [ROOT / d for d in ("solutions", "grader", "exercises", "tests", "notebooks")]

# What each hostile additive_attention.py does at import (so that no honest check can score).
ATTACKS = {
    "hang_ignoring_signals": ("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass\n",
                              "timed out"),
    "segfault": ("import ctypes\nctypes.string_at(0)\n", "SIGSEGV"),
    "os_exit": ("import os\nos._exit(0)\n", "exited with status 0"),
    "sys_exit": ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    "huge_allocation": ("import torch\nx = torch.ones(2 * 10**9)\n", "can't allocate memory"),
    "output_flood": ("while True:\n    print('x' * 10000)\n", "output limit"),
    "import_solutions": ("from solutions.additive_attention import AdditiveAttention\n", "No module named 'solutions"),
    "read_solutions": (f"open({str(ROOT / 'solutions' / 'additive_attention.py')!r}).read()\n", "FileNotFoundError"),
    "import_reference_package": ("from attnkit_reference.additive_attention import AdditiveAttention\n",
                                 "No module named 'attnkit_reference'"),
    "overwrite_grader": (f"open({str(ROOT / 'grader' / 'judge' / 'checks.py')!r}, 'w').write('')\n", "Read-only file system|No such file"),
    "overwrite_solutions": (f"open({str(ROOT / 'solutions' / 'masked_softmax.py')!r}, 'a').write('#')\n",
                            "Read-only file system|No such file"),
    "background_processes": (  # forked (a worker starts no program), one in a session of its own, named MARKER
        "import os, time\n"
        "for own_session in (False, True):\n"
        "    if os.fork() == 0:\n"
        "        if own_session:\n            os.setsid()\n"
        f"        open('/proc/self/comm', 'w').write({MARKER[:15]!r})\n"
        "        time.sleep(300)\n        os._exit(0)\n"
        "raise RuntimeError('started background processes')\n",
        "started background processes"),
}


def survivors() -> list[str]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmd = open(f"/proc/{entry.name}/cmdline", "rb").read().replace(b"\0", b" ").decode()
                name = open(f"/proc/{entry.name}/comm").read().strip()
                state = open(f"/proc/{entry.name}/stat").read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state in ("Z", "X"):  # killed, not yet reaped by whoever inherited it (a container's init may not)
                continue
            if MARKER in cmd or name == MARKER[:15]:  # comm: a forked child's own name (15 characters at most)
                out.append(cmd)
    return out


@ROOT_ONLY
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_hostile_submission(tmp_path, attack, sandbox, spare_sandboxes):
    code, reason = ATTACKS[attack]
    impl = make_impl(tmp_path / "impl", {"additive_attention.py": code})
    before = {str(d): snapshot(d) for d in GUARDED + [impl]}
    # the attacked problem, its prerequisite and one more: the others are graded normally beside it
    report = grade_shared(impl, ["masked_softmax", "additive_attention", "luong_attention"], timeout=6,
                   limits=Limits(memory_mb=2048, output_kb=256), sandbox=sandbox)
    after = {str(d): snapshot(d) for d in GUARDED + [impl]}
    attacked = report.problem("additive_attention")
    assert attacked.score == 0 and attacked.status in ("failed", "not_started")
    text = "\n".join(c.message for c in attacked.checks)
    assert re.search(reason, text), text[:2000]
    for p in report.problems:
        if p.id != "additive_attention":
            assert p.status == "passed", (p.id, [c.message for c in p.checks if c.status == "failed"][:1])
    assert after == before, "a file changed"
    time.sleep(0.1)
    assert survivors() == [], survivors()


def test_tampering_with_torch_changes_no_other_verdict(tmp_path):
    """masked_softmax patches comparisons, the default dtype, grad mode and Tensor methods at import,
    and returns garbage: it fails, and every other problem is graded as usual."""
    tamper = (
        "import torch\n"
        "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "torch.Tensor.__eq__ = lambda self, other: True\ntorch.set_default_dtype(torch.float64)\n"
        "torch.set_grad_enabled(False)\n\n"
        "def masked_softmax(scores, valid_lens=None):\n    return torch.zeros(1)\n"
    )
    files = {"masked_softmax.py": tamper, "_softmax_ok.py": (SOLUTIONS / "masked_softmax.py").read_text()}
    for p in all_problems():
        if "masked_softmax" in p.requires:
            files[f"{p.id}.py"] = (SOLUTIONS / f"{p.id}.py").read_text().replace("from .masked_softmax import",
                                                                               "from ._softmax_ok import")
    report = grade_shared(make_impl(tmp_path, files))
    assert report.problem("masked_softmax").score == 0
    assert all(p.status == "passed" for p in report.problems if p.id != "masked_softmax")


def test_lying_tensor_subclass_is_rejected(tmp_path):
    liar = (
        "import torch\n\nclass Liar(torch.Tensor):\n    def __eq__(self, other):\n        return True\n\n"
        "def masked_softmax(scores, valid_lens=None):\n"
        "    return torch.zeros_like(scores).as_subclass(Liar)\n"
    )
    report = grade_shared(make_impl(tmp_path, {"masked_softmax.py": liar}), ["masked_softmax"])
    p = report.problems[0]
    assert p.score == 0 and "Liar where a torch.Tensor was expected" in "\n".join(c.message for c in p.checks)
