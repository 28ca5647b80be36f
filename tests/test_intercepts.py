"""What the grader watches from inside torch: banned attention calls (however they are reached),
the largest allocation of a forward, and torch imports of the NumPy problem (in a fresh Python)."""
from __future__ import annotations

import pytest
import torch

from conftest import SOLUTIONS, make_impl
from attnkit.grading import grade
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
    report = grade(make_impl(tmp_path, {f"{pid}.py": source.replace(old, new)}), [pid])
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
    result = grade(make_impl(tmp_path, {f"{MHA}.py": source}), [MHA]).problems[0]
    messages = [c.message for c in result.checks if c.status == "failed" and c.id != "parameters"]
    assert messages and all("multi_head_attention_forward" in m for m in messages)


def test_banned_mode_passes_everything_else():
    with Banned(get(SDPA).banned):
        x = torch.randn(2, 3, 4)
        assert torch.allclose(torch.softmax(x @ x.mT, -1).sum(-1), torch.ones(2, 3))
        with pytest.raises(BannedCall, match="scaled_dot_product_attention"):
            torch.nn.functional.scaled_dot_product_attention(x, x, x)


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
    result = grade(make_impl(tmp_path, {f"{pid}.py": source}), [pid]).problems[0]
    checks = {c.id: c for c in result.checks}
    assert checks["memory"].status == "failed" and checks["parity_float64"].status == "passed"
    assert "the forward allocated a tensor of" in checks["memory"].message and "allowed at most" in checks["memory"].message


def test_torch_imported_through_a_sibling_module_is_found(tmp_path):
    pid = "numpy_additive_attention"
    source = (SOLUTIONS / f"{pid}.py").read_text().replace("import numpy as np", "import numpy as np\n\nfrom . import helper")
    impl = make_impl(tmp_path, {f"{pid}.py": source, "helper.py": "import torch.nn  # noqa: F401\n"})
    result = grade(impl, [pid]).problems[0]
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
    result = grade(make_impl(tmp_path, {f"{SDPA}.py": source}), [SDPA]).problems[0]
    failing = [c for c in result.checks if c.status == "failed" and c.id != "capabilities"]
    assert result.status == "failed" and failing
    assert all("BannedCall" in c.message and "scaled_dot_product_attention" in c.message for c in failing), \
        [c.message for c in failing]
    # and the source says so before anything runs: a banned name, a private binding, a mode switched off
    assert next(c for c in result.checks if c.id == "capabilities").status == "failed"


def test_nn_multiheadattention_with_modes_switched_off_is_caught(tmp_path):
    source = (SOLUTIONS / f"{MHA}.py").read_text().replace(
        "context = self.dropout(weights) @ v",
        "with torch._C.DisableTorchFunction():\n"
        "            inner = nn.MultiheadAttention(H * d, H, batch_first=True).to(queries)\n"
        "            inner(queries, keys, values)\n"
        "        context = self.dropout(weights) @ v")
    result = grade(make_impl(tmp_path, {f"{MHA}.py": source}), [MHA]).problems[0]
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
    result = grade(make_impl(tmp_path, {f"{pid}.py": source}), [pid]).problems[0]
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
    result = grade(make_impl(tmp_path, {f"{pid}.py": source}), [pid]).problems[0]
    memory = next(c for c in result.checks if c.id == "memory")
    assert memory.status == "failed" and "saw no operator" in memory.message, memory.message
    capabilities = next(c for c in result.checks if c.id == "capabilities")  # the source read says so too
    assert capabilities.status == "failed" and "torch modes" in capabilities.message, capabilities.message
    assert all(c.status == "passed" for c in result.checks if c.id not in ("memory", "capabilities")
               and c.status != "skipped")
