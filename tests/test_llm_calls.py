"""How the LLM track's calls are made and read. attention_backward computes its gradients by hand: every way into
automatic differentiation fails the problem with a message naming the function the learner called, however it was
imported. causal_self_attention returns nested outputs, (output, (k, v)): another nesting is named."""
from __future__ import annotations

import pytest

from conftest import make_impl, grade_shared

FORWARD = '''
def _forward(q, k, v, is_causal):
    Tq, Tk = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if is_causal:
        s = s.masked_fill(~torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq), torch.finfo(s.dtype).min)
    p = torch.softmax(s, -1)
    if is_causal:
        p = p * torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq)
    return p @ v
'''

ENTRIES = {  # how the learner reaches autograd -> the name the message must give
    "Tensor.backward": ("import torch\n", '''
    leaves = [t.detach().requires_grad_() for t in (queries, keys, values)]
    with torch.enable_grad():
        (_forward(*leaves, is_causal) * grad_output).sum().backward()
    return tuple(t.grad for t in leaves)'''),
    "torch.autograd.grad": ("import torch\nfrom torch.autograd import grad as g\n", '''
    leaves = [t.detach().requires_grad_() for t in (queries, keys, values)]
    with torch.enable_grad():
        return g((_forward(*leaves, is_causal) * grad_output).sum(), leaves)'''),
    "torch.autograd.functional.vjp": ("import torch\nimport torch.autograd.functional as AF\n", '''
    return AF.vjp(lambda q, k, v: _forward(q, k, v, is_causal), (queries, keys, values), grad_output)[1]'''),
    "torch.func.vjp": ("import torch\nfrom torch.func import vjp\n", '''
    out, back = vjp(lambda q, k, v: _forward(q, k, v, is_causal), queries, keys, values)
    return back(grad_output)'''),
    "torch.func.grad": ("import torch\nimport torch.func as tf\n", '''
    loss = lambda q, k, v: (_forward(q, k, v, is_causal) * grad_output).sum()
    return tf.grad(loss, argnums=(0, 1, 2))(queries, keys, values)'''),
    "make_dual": ("import torch\nimport torch.autograd.forward_ad as fwAD\n", '''
    with fwAD.dual_level():
        q = fwAD.make_dual(queries, torch.ones_like(queries))
        _forward(q, keys, values, is_causal)
    raise AssertionError("forward-mode AD ran")'''),
}


@pytest.mark.parametrize("entry", ENTRIES)
def test_each_way_into_autograd_fails_the_problem_naming_it(tmp_path, entry):
    imports, body = ENTRIES[entry]
    source = imports + FORWARD + f"\n\ndef attention_backward(queries, keys, values, grad_output, is_causal=False):{body}\n"
    report = grade_shared(make_impl(tmp_path, {"attention_backward.py": source}), ["attention_backward"])
    result = report.problems[0]
    assert report.grader_errors == 0
    assert result.score == 0, [(c.id, c.status) for c in result.checks]
    message = next(c.message for c in result.checks if c.id == "parity_float64")
    assert "which this problem bans: automatic differentiation" in message and entry in message, message


def test_a_flat_return_where_a_cache_tuple_is_expected_is_named(tmp_path):
    """Nested outputs: returning (output, k, v) instead of (output, (k, v)) fails, saying what was expected."""
    source = (make_impl(tmp_path / "ref") / "causal_self_attention.py").read_text()
    flat = source.replace("reshape(B, T, E)), (k, v)", "reshape(B, T, E)), k, v")
    assert flat != source
    report = grade_shared(make_impl(tmp_path / "impl", {"causal_self_attention.py": flat}), ["causal_self_attention"])
    result = report.problems[0]
    assert result.status == "failed" and report.grader_errors == 0
    message = next(c.message for c in result.checks if c.id == "shapes")
    assert "returned a tuple of 3, expected (output, (k, v))" in message, message
