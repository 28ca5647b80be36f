"""Three ways a wrong submission used to pass, each closed: NaN gradients from a row with no allowed key, a finite
fill of -1e4 that leaks weight once valid scores sit near -1e4, and a persistent buffer in a module's state_dict."""
from __future__ import annotations

from conftest import SOLUTIONS, make_impl
from attnkit.grading import grade


def _check(report, pid, cid):
    return next(c for c in report.problem(pid).checks if c.id == cid)


def test_nan_gradients_of_a_row_with_no_allowed_key_fail(tmp_path):
    """-inf fill, the forward cleaned with nan_to_num: right values, NaN gradients on an empty row."""
    code = '''import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(scores.shape[-1]) < lens[..., None]
    bias = torch.zeros_like(scores).masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores + bias, dim=-1), nan=0.0)
'''
    report = grade(make_impl(tmp_path, {"masked_softmax.py": code}), ["masked_softmax"], sandbox=False)
    grads = _check(report, "masked_softmax", "gradients")
    assert grads.status == "failed" and "no allowed key" in grads.message and "NaN" in grads.message
    others = [c for c in report.problem("masked_softmax").checks if c.id != "gradients" and c.status == "failed"]
    assert others == [], [c.id for c in others]


def test_a_fill_of_minus_1e4_fails_the_stability_check(tmp_path):
    """The old BERT constant, without the mask applied again after the softmax: exact zeros for ordinary scores
    (exp(-1e4) underflows), a leak once the valid scores sit near -1e4."""
    code = '''import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(scores.shape[-1]) < lens[..., None]
    return torch.softmax(scores.masked_fill(~keep, -1e4), dim=-1)
'''
    report = grade(make_impl(tmp_path, {"masked_softmax.py": code}), ["masked_softmax"], sandbox=False)
    stability = _check(report, "masked_softmax", "stability")
    assert stability.status == "failed" and "masked key" in stability.message and "exactly 0" in stability.message


def test_a_persistent_buffer_fails_the_parameters_check(tmp_path):
    code = (SOLUTIONS / "multihead_attention.py").read_text()
    anchor = "super().__init__()\n"
    assert anchor in code
    code = code.replace(anchor, anchor + "        self.register_buffer(\"causal\", torch.ones(4, 4).tril())\n", 1)
    report = grade(make_impl(tmp_path, {"multihead_attention.py": code}), ["multihead_attention"], sandbox=False)
    params = _check(report, "multihead_attention", "parameters")
    assert params.status == "failed" and "persistent=False" in params.message and "causal" in params.message
    fixed = code.replace('torch.ones(4, 4).tril())', 'torch.ones(4, 4).tril(), persistent=False)')
    report = grade(make_impl(tmp_path / "fixed", {"multihead_attention.py": fixed}), ["multihead_attention"],
                   sandbox=False)
    assert _check(report, "multihead_attention", "parameters").status == "passed"
