"""What the grader watches from inside torch: banned attention calls (however they are reached),
the largest allocation of a forward, and torch imports of the NumPy problem (in a fresh Python)."""
from __future__ import annotations

import pytest
import torch

from conftest import SOLUTIONS, make_impl, grade_shared
from attnkit.run.intercept import Banned, BannedCall, Peak
from attnkit.problems import get

SDPA = "scaled_dot_product_attention"
MHA = "multihead_attention"


@pytest.mark.parametrize("pid,call,named", [
    (SDPA, "torch.nn.functional.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)",
     "torch.nn.functional.scaled_dot_product_attention"),
    (SDPA, "torch.ops.aten._scaled_dot_product_attention_math(queries, keys, values, attn_mask=mask)[0]",
     "_scaled_dot_product_attention_math"),
    (MHA, "torch.nn.functional.multi_head_attention_forward(q, k, v, 1, 1, None, None, None, None, False, 0.0, "
          "torch.eye(1), None)[0]", "multi_head_attention_forward"),
])
def test_banned_calls_fail_the_problem_naming_the_call(tmp_path, pid, call, named):
    source = (SOLUTIONS / f"{pid}.py").read_text()
    old = "return weights @ values, weights" if pid == SDPA else "context = self.dropout(weights) @ v"
    new = f"return {call}, weights" if pid == SDPA else f"context = self.dropout(weights) @ v\n        _ = {call}"
    report = grade_shared(make_impl(tmp_path, {f"{pid}.py": source.replace(old, new)}), [pid])
    result = report.problems[0]
    assert result.status == "failed"
    failing = [c for c in result.checks if c.status == "failed"]
    assert len(failing) >= len([c for c in result.checks if c.status != "skipped"]) - 1  # all but parameters
    assert all("BannedCall" in c.message and named in c.message for c in failing if c.id != "capabilities")
    source_read = next(c for c in result.checks if c.id == "capabilities")  # the name read in the source, too
    assert source_read.status == "failed" and "which this problem's contract bans" in source_read.message


def test_a_module_built_on_nn_multiheadattention_is_caught(tmp_path):
    source = (
        "import torch\nfrom torch import nn\n\n"
        "class MultiHeadAttention(nn.Module):\n"
        "    def __init__(self, embed_dim, num_heads, dropout=0.0):\n"
        "        super().__init__()\n"
        "        self.h = num_heads\n"
        "        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(embed_dim, embed_dim) for _ in range(4))\n\n"
        "    def forward(self, queries, keys, values, mask=None):\n"
        "        inner = nn.MultiheadAttention(queries.shape[-1], self.h, batch_first=True).to(queries)\n"
        "        with torch.no_grad():\n"
        "            inner.in_proj_weight.copy_(torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight]))\n"
        "        return inner(queries, keys, values, average_attn_weights=False)\n"
    )
    result = grade_shared(make_impl(tmp_path, {f"{MHA}.py": source}), [MHA]).problems[0]
    messages = [c.message for c in result.checks if c.status == "failed" and c.id != "parameters"]
    assert messages and all("multi_head_attention_forward" in m for m in messages)


def test_banned_mode_passes_everything_else():
    """The grader's own runs of a catalogued mistake refuse banned calls with this mode (no worker set the dispatcher's
    refusal up there): it refuses them, and nothing else."""
    with Banned(get(SDPA).banned):
        x = torch.randn(2, 3, 4)
        assert torch.allclose(torch.softmax(x @ x.mT, -1).sum(-1), torch.ones(2, 3))
        with pytest.raises(BannedCall, match="scaled_dot_product_attention"):
            torch.nn.functional.scaled_dot_product_attention(x, x, x)
    for _ in range(2):  # each function is decided once per set of names (intercept._VERDICTS), then read back
        with Banned(get(SDPA).banned), pytest.raises(BannedCall, match="scaled_dot_product_attention"):
            torch.nn.functional.scaled_dot_product_attention(x, x, x)
    with Banned(()):  # another set of names decides for itself: nothing refused here
        torch.nn.functional.scaled_dot_product_attention(x, x, x)
    with Banned(("softmax",)), pytest.raises(BannedCall, match="softmax"):  # passed above, refused here
        torch.softmax(x, -1)


def test_peak_counts_allocations_not_views_or_in_place():
    a, b = torch.randn(4, 1, 8), torch.randn(1, 6, 8)
    with Peak() as peak:
        wide = a.expand(4, 6, 8)  # a view: free
        wide.unsqueeze(0)
        scores = (a * 2).sum(-1)  # (4, 1, 8) allocated, then (4, 1)
        scores.add_(1)  # in place: free
    assert peak.elements == 32, peak.op
    with Peak() as peak:
        torch.tanh(a + b)  # the full (4, 6, 8) broadcast result
    assert peak.elements == 192 and "(4, 6, 8)" in peak.op


def test_memory_bound_is_measured_on_the_learners_forward(tmp_path):
    """Broadcasting the whole (B, Tq, Tk, h) features, however written, is caught with both numbers."""
    source = (
        "import torch\nfrom .masked_softmax import masked_softmax\n\n"
        "def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):\n"
        "    if max_elements < W_q.shape[0]:\n        raise ValueError('max_elements < h')\n"
        "    q, k = queries @ W_q.T, keys @ W_k.T\n"
        "    scores = torch.einsum('bqkh,h->bqk', torch.tanh(q[:, :, None] + k[:, None]), w_v[0])\n"
        "    weights = masked_softmax(scores, valid_lens)\n"
        "    return weights @ values, weights\n"
    )
    pid = "chunked_additive_attention"
    result = grade_shared(make_impl(tmp_path, {f"{pid}.py": source}), [pid]).problems[0]
    checks = {c.id: c for c in result.checks}
    assert checks["memory"].status == "failed" and checks["parity_float64"].status == "passed"
    assert "the forward allocated a tensor of" in checks["memory"].message and "allowed at most" in checks["memory"].message


def test_torch_imported_through_a_sibling_module_is_found(tmp_path):
    pid = "numpy_additive_attention"
    source = (SOLUTIONS / f"{pid}.py").read_text().replace("import numpy as np", "import numpy as np\n\nfrom . import helper")
    impl = make_impl(tmp_path, {f"{pid}.py": source, "helper.py": "import torch.nn  # noqa: F401\n"})
    result = grade_shared(impl, [pid]).problems[0]
    check = next(c for c in result.checks if c.id == "no_torch")
    assert check.status == "failed" and "in a fresh Python imports torch" in check.message and check.mistake == "imports_torch"
    assert all(c.status == "passed" for c in result.checks if c.id != "no_torch")  # numbers right: only that fails


@pytest.mark.parametrize("call", [
    "torch.ops.aten.scaled_dot_product_attention.default(queries, keys, values, attn_mask=mask)",
    "torch.ops.aten.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)",
    "torch._C._nn.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)",
])
@pytest.mark.parametrize("guard", ["", "torch._C.DisableTorchFunction()",
                                   "torch.utils._python_dispatch._disable_current_modes()"])
def test_no_path_reaches_a_banned_operator(tmp_path, call, guard):
    """OpOverload, its packet, the C binding; with the torch-function or dispatch modes switched off."""
    body = f"return {call}, weights" if not guard else f"with {guard}:\n        out = {call}\n    return out, weights"
    source = (SOLUTIONS / f"{SDPA}.py").read_text().replace("return weights @ values, weights", body)
    result = grade_shared(make_impl(tmp_path, {f"{SDPA}.py": source}), [SDPA]).problems[0]
    failing = [c for c in result.checks if c.status == "failed" and c.id != "capabilities"]
    assert result.status == "failed" and failing
    assert all("BannedCall" in c.message and "scaled_dot_product_attention" in c.message for c in failing), \
        [c.message for c in failing]
    # and the source says so before anything runs: a banned name, a private binding, a mode switched off
    assert next(c for c in result.checks if c.id == "capabilities").status == "failed"


def test_a_banned_call_in_the_call_measured_from_outside_is_refused(tmp_path):
    """The backstop (measured from outside the worker, in a window of its own): the refusals set up for the worker's
    life stand there too. Code that calls the banned function only on the backstop's shapes fails."""
    pid = "flash_attention"
    source = (SOLUTIONS / f"{pid}.py").read_text().replace(
        "    Tq, d = queries.shape[-2], queries.shape[-1]\n",
        "    Tq, d = queries.shape[-2], queries.shape[-1]\n"
        "    if Tq >= 4096:\n"
        "        out = torch.nn.functional.scaled_dot_product_attention(queries, keys, values)\n"
        "        return out, torch.logsumexp(queries @ keys.transpose(-2, -1) * d ** -0.5, -1)\n", 1)
    assert "Tq >= 4096" in source
    result = grade_shared(make_impl(tmp_path, {f"{pid}.py": source}), [pid]).problems[0]
    checks = {c.id: c for c in result.checks}
    assert checks["memory"].status == "failed" and "BannedCall" in checks["memory"].message, checks["memory"].message
    assert checks["parity_float64"].status == "passed"


def test_the_backstop_compares_rows_the_code_cannot_know(tmp_path):
    """The backstop's values are compared on 64 seeded rows of 4096 (the reference computes only those): code that is
    right everywhere but on every seventh row of the large call still fails, with the values' message."""
    pid = "flash_attention"
    source = (SOLUTIONS / f"{pid}.py").read_text().replace(
        "    return torch.cat(outs, dim=-2).to(queries.dtype), torch.cat(lses, dim=-1).to(queries.dtype)",
        "    out = torch.cat(outs, dim=-2).to(queries.dtype)\n"
        "    if Tq >= 4096:\n"
        "        out[..., 3::7, :] = 0\n"
        "    return out, torch.cat(lses, dim=-1).to(queries.dtype)", 1)
    assert "3::7" in source
    result = grade_shared(make_impl(tmp_path, {f"{pid}.py": source}), [pid]).problems[0]
    checks = {c.id: c for c in result.checks}
    assert checks["memory"].status == "failed" and "output" in checks["memory"].message, checks["memory"].message
    assert "Tq=4096" in checks["memory"].message
    assert all(c.status == "passed" for c in result.checks if c.id not in ("memory",) and c.status != "skipped")


def test_nn_multiheadattention_with_modes_switched_off_is_caught(tmp_path):
    source = (SOLUTIONS / f"{MHA}.py").read_text().replace(
        "context = self.dropout(weights) @ v",
        "with torch._C.DisableTorchFunction():\n"
        "            inner = nn.MultiheadAttention(H * d, H, batch_first=True).to(queries)\n"
        "            inner(queries, keys, values)\n"
        "        context = self.dropout(weights) @ v")
    result = grade_shared(make_impl(tmp_path, {f"{MHA}.py": source}), [MHA]).problems[0]
    messages = [c.message for c in result.checks if c.status == "failed" and c.id not in ("parameters", "capabilities")]
    assert messages and all("BannedCall" in m and "multi_head_attention_forward" in m for m in messages)
    assert next(c for c in result.checks if c.id == "capabilities").status == "failed"


def test_an_allocation_hidden_from_the_dispatch_mode_is_still_caught(tmp_path):
    """The full (B, Tq, Tk, h) tensor built with the dispatch modes off: the backstop (the worker's cgroup, or its own
    resident memory without cgroups) sees it."""
    source = (
        "import torch\nfrom torch.utils._python_dispatch import _disable_current_modes\n"
        "from .masked_softmax import masked_softmax\n\n"
        "def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):\n"
        "    if max_elements < W_q.shape[0]:\n        raise ValueError('max_elements < h')\n"
        "    with _disable_current_modes():\n"
        "        q, k = queries @ W_q.T, keys @ W_k.T\n"
        "        scores = torch.tanh(q[:, :, None] + k[:, None]) @ w_v[0]\n"
        "    weights = masked_softmax(scores, valid_lens)\n"
        "    return weights @ values, weights\n"
    )
    pid = "chunked_additive_attention"
    result = grade_shared(make_impl(tmp_path, {f"{pid}.py": source}), [pid]).problems[0]
    memory = next(c for c in result.checks if c.id == "memory")
    assert memory.status == "failed" and "memory grew by" in memory.message, memory.message


def test_a_switched_off_measurement_fails_the_memory_check(tmp_path):
    pid = "chunked_additive_attention"
    source = (SOLUTIONS / f"{pid}.py").read_text()
    source = source.replace("def chunked_additive_attention(", "def _inner(") + (
        "\n\ndef chunked_additive_attention(*args, **kwargs):\n"
        "    from torch.utils._python_dispatch import _disable_current_modes\n"
        "    with _disable_current_modes():\n"
        "        return _inner(*args, **kwargs)\n")
    result = grade_shared(make_impl(tmp_path, {f"{pid}.py": source}), [pid]).problems[0]
    memory = next(c for c in result.checks if c.id == "memory")
    assert memory.status == "failed" and "saw no operator" in memory.message, memory.message
    capabilities = next(c for c in result.checks if c.id == "capabilities")  # the source read says so too
    assert capabilities.status == "failed" and "torch modes" in capabilities.message, capabilities.message
    assert all(c.status == "passed" for c in result.checks if c.id not in ("memory", "capabilities")
               and c.status != "skipped")


WALK = """
import sys, types, torch
import attnkit.run.preload  # noqa: F401 - as a worker's parent: its index of torch's functions made
from attnkit.run import intercept
banned = {banned!r}
walked = sorted((name, attr) for name, module in list(sys.modules.items())
                if module is not None and (name == "torch" or name.startswith("torch."))
                for attr, value in list(vars(module).items())
                if callable(value) and not isinstance(value, type(sys)) and not attr.startswith("__")
                and intercept._matches(attr, banned))
intercept.guard_functions(banned)
guarded = sorted((name, attr) for name, module in list(sys.modules.items())
                 if module is not None and (name == "torch" or name.startswith("torch."))
                 for attr, value in list(vars(module).items())
                 if isinstance(value, types.FunctionType) and value.__name__ == "banned_function")
print(len(walked), walked == guarded)
"""


@pytest.mark.parametrize("banned", [get(SDPA).banned, ("multi_head_attention_forward", "_native_multi_head*")])
def test_the_index_of_torchs_functions_finds_what_a_walk_finds(banned):
    """A worker's bans search the parent's index (one string) instead of walking every module: the same functions are
    replaced as a walk of every loaded torch module finds (in a fresh Python, since it replaces torch's functions)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", WALK.format(banned=tuple(banned))], capture_output=True, text=True,
                         check=True).stdout.split()
    assert int(out[0]) >= 2 and out[1] == "True", out
