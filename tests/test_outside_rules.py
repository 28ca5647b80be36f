"""Rules a submission cannot undo from inside its own process: memory measured by the grader in the worker's cgroup,
the autograd engine refused at the type level for the worker's life, banned functions unreachable with every Python
mode switched off. Each attack here passed before these were outside the learner's reach (issue 21)."""
from __future__ import annotations

import os

import pytest

from conftest import SANDBOXES, make_impl, grade_shared
from attnkit.run import cgroup


def _cgroup_mark():
    why = cgroup.reason()
    if why and os.environ.get("ATTNKIT_REQUIRE_CGROUPS") == "1":
        raise RuntimeError(f"ATTNKIT_REQUIRE_CGROUPS=1, and {why}")
    return pytest.mark.skipif(why is not None, reason=f"memory cgroups: {why}")


needs_cgroups = _cgroup_mark()

MODES_OFF = "from torch.utils._python_dispatch import _disable_current_modes\n"

FULL_FLASH = '''import math, torch
from torch.utils._python_dispatch import _disable_current_modes
{prelude}
def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be positive")
    with _disable_current_modes(), torch._C.DisableTorchFunction():  # no in-process measurement sees what follows
        s = {scores}
        Tq, Tk = s.shape[-2:]
        if is_causal:
            s = s.masked_fill(~torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq), float("-inf"))
        lse = torch.logsumexp(s, -1)
        w = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)
        out = (w @ values).clone()
    return out + 0.0, lse + 0.0
'''

ATTACKS = {
    # the full scores built with the dispatch and function modes switched off, a small operation after
    "flash_modes_off": ("flash_attention", FULL_FLASH.format(
        prelude="",
        scores="queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])")),
    # the full scores computed in NumPy (no torch mode sees NumPy) and brought back with torch.from_numpy
    "flash_numpy": ("flash_attention", FULL_FLASH.format(
        prelude="import numpy as np",
        scores="torch.from_numpy(queries.detach().numpy() @ keys.detach().numpy().swapaxes(-1, -2)"
               " / math.sqrt(queries.shape[-1]))")),
    # a buffer of the full scores' size filled at import, then written in place during the call
    "flash_buffer_at_import": ("flash_attention", FULL_FLASH.format(
        prelude="BUFFER = torch.ones(4096, 8192)",
        scores="(torch.matmul(queries[0], keys[0].T, out=BUFFER[:queries.shape[-2], :keys.shape[-2]]) "
               "if queries.shape[-2:] == (4096, 8) and keys.shape[-2] == 8192 else queries @ keys.transpose(-2, -1))"
               " / math.sqrt(queries.shape[-1])")),
    # the full scores built by a child process (its pages are charged to the same cgroup), on long inputs only: a
    # fork and a 256 MiB array on each of the problem's calls ran past the time limit on a slow machine
    "flash_child_process": ("flash_attention", FULL_FLASH.format(
        prelude="import os, numpy as np",
        scores="(queries.shape[-2] * keys.shape[-2] < 2**20 or"
               " (os.waitpid(pid, 0) if (pid := os.fork()) else os._exit(int(np.ones((4096, 8192)).sum() > 0))))"
               " and queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])")),
    # keys and values repeated per query head, with the modes off
    "gqa_repeat_modes_off": ("grouped_query_attention", MODES_OFF + '''import torch

def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    if Hq % keys.shape[1]:
        raise ValueError("Hq must be a multiple of Hkv")
    G = Hq // keys.shape[1]
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        k, v = keys.repeat_interleave(G, dim=1), values.repeat_interleave(G, dim=1)
        s = queries @ k.transpose(-2, -1) / d ** 0.5
        if mask is not None:
            s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
        w = torch.softmax(s, -1)
        if mask is not None:
            w = w * mask
        out = w @ v
    return out + 0.0, w + 0.0
'''),
    # the full (B, Tq, Tk, h) tensor, then the kernel's peak resident count reset through /proc/self/clear_refs
    "chunked_clear_refs": ("chunked_additive_attention", MODES_OFF + '''import torch
from .masked_softmax import masked_softmax

def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    if max_elements < W_q.shape[0]:
        raise ValueError("max_elements < h")
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        features = torch.tanh((queries @ W_q.T).unsqueeze(2) + (keys @ W_k.T).unsqueeze(1))
        scores = (features @ w_v[0]).clone()
    del features
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    weights = masked_softmax(scores + 0.0, valid_lens)
    return torch.bmm(weights, values), weights
'''),
}


@needs_cgroups
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_memory_attack_fails_memory(tmp_path, attack, sandbox):
    problem, source = ATTACKS[attack]
    report = grade_shared(make_impl(tmp_path, {f"{problem}.py": source}), [problem], sandbox=sandbox)
    assert report.memory == "cgroup"
    checks = {c.id: c for c in report.problem(problem).checks}
    memory = checks["memory"]
    assert memory.status == "failed", memory.message
    assert "read by the grader outside your process" in memory.message, memory.message
    assert all(c.status != "error" for c in checks.values())


@needs_cgroups
def test_outside_measurement_is_what_failed(tmp_path):
    """The modes-off attack passes every in-process measurement: only the grader's cgroup reading fails it."""
    problem, source = ATTACKS["gqa_repeat_modes_off"]
    report = grade_shared(make_impl(tmp_path, {f"{problem}.py": source}), [problem], sandbox=False)
    message = report.problem(problem).checks[[c.id for c in report.problem(problem).checks].index("memory")].message
    assert "the kernel's count, read by the grader outside your process" in message
    assert "allocated a tensor of" not in message


def test_without_cgroups_the_report_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CGROUPS", "off")
    cgroup._layout.cache_clear()
    try:
        report = grade_shared(make_impl(tmp_path), ["grouped_query_attention"], sandbox=False)
    finally:
        monkeypatch.delenv("ATTNKIT_CGROUPS")
        cgroup._layout.cache_clear()
    assert report.memory == "worker"
    assert report.score == report.max_score


@needs_cgroups
def test_groups_are_removed(tmp_path):
    grade_shared(make_impl(tmp_path), ["flash_attention"], sandbox=False)
    layout = cgroup._layout()
    assert os.listdir(layout.root) == [] or all(not os.path.isdir(f"{layout.root}/{d}") for d in os.listdir(layout.root))


BACKWARD = '''import torch
{prelude}
def attention_backward(queries, keys, values, grad_output, is_causal=False):
    q, k, v = (t.detach().requires_grad_() for t in (queries, keys, values))
    with torch.enable_grad():
        s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        if is_causal:
            Tq, Tk = s.shape[-2:]
            s = s.masked_fill(~torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq), float("-inf"))
        o = torch.softmax(s, -1).nan_to_num(0.0) @ v
        {backward}
    return tuple(g if g is not None else torch.zeros_like(t) for g, t in zip(grads, (queries, keys, values)))
'''

AUTOGRAD_ATTACKS = {
    "engine_saved_at_import": BACKWARD.format(
        prelude="from torch.autograd.variable import Variable\nSAVED = Variable._execution_engine",
        backward="mine, Variable._execution_engine = Variable._execution_engine, SAVED\n"
                 "        try:\n            grads = torch.autograd.grad((o * grad_output).sum(), (q, k, v), allow_unused=True)\n"
                 "        finally:\n            Variable._execution_engine = mine"),
    "engine_built_anew": BACKWARD.format(
        prelude="",
        backward="grads = torch._C._ImperativeEngine().run_backward(((o * grad_output).sum(),), (None,), False, False,"
                 " (q, k, v), True, False)"),
}


@pytest.mark.parametrize("attack", sorted(AUTOGRAD_ATTACKS))
def test_autograd_cannot_be_restored(tmp_path, attack):
    report = grade_shared(make_impl(tmp_path, {"attention_backward.py": AUTOGRAD_ATTACKS[attack]}), ["attention_backward"],
                   sandbox=False)
    result = report.problem("attention_backward")
    assert result.score == 0, [(c.id, c.status) for c in result.checks]
    failed = [c for c in result.checks if c.status == "failed"]
    assert failed and all("automatic differentiation" in c.message for c in failed if "raised" in c.message)
    assert all(c.status != "error" for c in result.checks)


FLEX = '''import torch
from torch.nn.attention.flex_attention import flex_attention as FLEX
from torch.utils._python_dispatch import _disable_current_modes

def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be positive")
    lead = queries.shape[:-2]
    q, k, v = (t.reshape(-1, 1, *t.shape[-2:]) for t in (queries, keys, values))
    Tq, Tk = q.shape[-2], k.shape[-2]
    mod = (lambda s, b, h, i, j: torch.where(j <= i + (Tk - Tq), s, float("-inf"))) if is_causal else None
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        out, lse = FLEX(q, k, v, score_mod=mod, return_lse=True)
    return out.reshape(*lead, Tq, -1), lse.reshape(*lead, Tq)
'''


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_flex_attention_unreachable_with_modes_off(tmp_path, sandbox):
    report = grade_shared(make_impl(tmp_path, {"flash_attention.py": FLEX}), ["flash_attention"], sandbox=sandbox)
    result = report.problem("flash_attention")
    assert result.score <= 3, [(c.id, c.status, c.score) for c in result.checks]
    raised = [c for c in result.checks if c.status == "failed" and "flex_attention" in c.message]
    assert raised, [c.message for c in result.checks if c.status == "failed"]
    assert all(c.status != "error" for c in result.checks)


FORWARD_MODE = '''import torch
import torch.autograd.forward_ad as fwAD
from torch.utils._python_dispatch import _disable_current_modes

def attention_backward(queries, keys, values, grad_output, is_causal=False):
    with _disable_current_modes(), torch._C.DisableTorchFunction(), fwAD.dual_level():
        dual = fwAD.make_dual(queries, torch.ones_like(queries))
        fwAD.unpack_dual(dual)
    return queries * 0, keys * 0, values * 0
'''

SDPA_MODES_OFF = '''import torch
from torch.utils._python_dispatch import _disable_current_modes

def scaled_dot_product_attention(queries, keys, values, mask=None):
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        out, w = torch.ops.aten._scaled_dot_product_attention_math(queries, keys, values, mask)
    return out + 0.0, w + 0.0
'''


@pytest.mark.parametrize("problem, source, named", [
    ("attention_backward", FORWARD_MODE, "automatic differentiation"),
    ("scaled_dot_product_attention", SDPA_MODES_OFF, "_scaled_dot_product_attention_math"),
], ids=["forward_mode", "sdpa_aten"])
def test_banned_kernels_hold_with_modes_off(tmp_path, problem, source, named):
    report = grade_shared(make_impl(tmp_path, {f"{problem}.py": source}), [problem], sandbox=False)
    result = report.problem(problem)
    raised = [c for c in result.checks if c.status == "failed" and named in c.message]
    assert raised, [c.message[:300] for c in result.checks if c.status == "failed"]
    assert result.score < result.max_score / 2
    assert all(c.status != "error" for c in result.checks)


@needs_cgroups
def test_a_lost_outside_reading_fails_closed(tmp_path, monkeypatch):
    """A window opened (so the worker was not asked to count its own memory) whose reading is lost is not judged, and
    not judged fails: the backstop never passes on no measurement at all."""
    def lost(self):
        self.window = None
        return cgroup.Window(0, None)

    monkeypatch.setattr(cgroup.Memory, "close_window", lost)
    report = grade_shared(make_impl(tmp_path), ["flash_attention"], sandbox=False)
    memory = next(c for c in report.problem("flash_attention").checks if c.id == "memory")
    assert memory.status == "failed" and memory.max_score > 0, memory
    assert "could not measure the memory of this call" in memory.message


CHECKPOINTED = '''"""Chunked additive attention, each chunk's scores recomputed in the backward (torch.utils.checkpoint)."""
import torch
from torch.utils.checkpoint import checkpoint as recompute

from .masked_softmax import masked_softmax


def _scores(qi, kj, w):
    return torch.tanh(qi + kj) @ w


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements is smaller than h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    q, k = (queries @ W_q.T).reshape(-1, h), (keys @ W_k.T).reshape(-1, h)
    parts = []
    for s in range(0, B * Tq * Tk, max_elements // h):
        idx = torch.arange(s, min(s + max_elements // h, B * Tq * Tk))
        b, i, j = idx // (Tq * Tk), idx // Tk % Tq, idx % Tk
        parts.append(recompute(_scores, q[b * Tq + i], k[b * Tk + j], w_v[0], use_reentrant=False))
    weights = masked_softmax(torch.cat(parts).reshape(B, Tq, Tk), valid_lens)
    return weights @ values, weights
'''


@needs_cgroups
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_part_of_torch_imported_on_first_call_is_not_the_learners_memory(tmp_path, sandbox, monkeypatch):
    """torch.utils.checkpoint's first call imports torch._dynamo (about 75 MB): a correct chunked solution that
    checkpoints its chunks passes the backstop's held rule, since the grader imports that module before the worker's
    memory is counted (judge/scan's LAZY); without that import, the same file fails it."""
    import attnkit.grading

    problem = "chunked_additive_attention"
    impl = make_impl(tmp_path / "a", {f"{problem}.py": CHECKPOINTED})
    report = grade_shared(impl, [problem], sandbox=sandbox)
    assert report.memory == "cgroup"
    assert report.problem(problem).status == "passed", report.problem(problem).checks
    assert any("torch.utils.checkpoint" in u.what and not u.refused for u in report.problem(problem).uses)
    if sandbox:
        return
    monkeypatch.setattr(attnkit.grading, "lazy_imports", lambda scan: [])
    report = grade_shared(make_impl(tmp_path / "b", {f"{problem}.py": CHECKPOINTED}), [problem], sandbox=sandbox)
    memory = {c.id: c for c in report.problem(problem).checks}["memory"]
    assert memory.status == "failed" and "already held" in memory.message, memory.message


FORKING_HOG = '''import os, time
import torch

TRIED = []


def masked_softmax(scores, valid_lens=None):
    if not TRIED:  # once per worker; every call then says how the children ended (the calls come in any order)
        children = []
        for _ in range(3):  # each below the per-process limit, together far above the worker's
            pid = os.fork()
            if pid == 0:
                block = b"\\x01" * (400 << 20)
                time.sleep(3)
                os._exit(0)
            children.append(pid)
        TRIED.append([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children])
    raise RuntimeError(f"CHILDREN ENDED {TRIED[0]}")
'''


@needs_cgroups
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_worker_s_memory_limit_holds_for_its_processes_together(tmp_path, sandbox):
    """A worker that forks holds its limit for all its processes together (the kernel's count in its cgroup), where a
    limit per process (RLIMIT_DATA) lets each child hold as much: three children of 400 MB under a limit of 700 MB do
    not all live to the end."""
    import re

    from attnkit.grading import grade
    from attnkit.run.sandbox import Limits

    impl = make_impl(tmp_path / "impl", {"masked_softmax.py": FORKING_HOG})
    report = grade(impl, ["masked_softmax"], timeout=40, limits=Limits(memory_mb=700), sandbox=sandbox)
    text = "\n".join(c.message for c in report.problems[0].checks)
    ended = re.search(r"CHILDREN ENDED \[([^\]]*)\]", text)
    assert ended or "more than its memory limit (700 MB, all its processes together)" in text, text[:1500]
    assert ended is None or ended.group(1) != "0, 0, 0", text[:1500]
