"""Messages carry the digits that show the problem, and say where a departure may start."""
from __future__ import annotations

import torch

from conftest import make_impl
from attnkit.grading import grade
from attnkit.judge.context import STAGE_HINTS, _stage_hint


def test_a_row_sum_off_by_float32_rounding_is_shown_with_its_digits(tmp_path):
    code = '''import torch


def masked_softmax(scores, valid_lens=None):
    work = scores.float()
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
        keep = torch.arange(scores.shape[-1]) < lens[..., None]
        work = work.masked_fill(~keep, torch.finfo(torch.float32).min)
        return (torch.softmax(work, dim=-1) * keep).to(scores.dtype)
    return torch.softmax(work, dim=-1).to(scores.dtype)
'''
    report = grade(make_impl(tmp_path, {"masked_softmax.py": code}), ["masked_softmax"], sandbox=False)
    sums = next(c for c in report.problem("masked_softmax").checks if c.id == "weight_sums")
    assert sums.status == "failed" and "off by" in sums.message
    shown = sums.message.split(" sum to ")[1].split(" ")[0]
    assert shown != "1" and len(shown) > 8, sums.message  # not rounded back to 1


def test_weights_within_tolerance_but_not_exact_are_not_called_a_match():
    expected = torch.softmax(torch.randn(2, 3, 4, dtype=torch.float64), -1)
    assert _stage_hint(expected.clone(), expected) == STAGE_HINTS[1]
    hint = _stage_hint(expected + 1e-9, expected)
    assert hint != STAGE_HINTS[1] and "not exact" in hint and "1e-09" in hint
