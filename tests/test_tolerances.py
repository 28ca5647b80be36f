"""The tolerances are justified: the reference itself, computed in a lower precision, sits
well inside them, and the stability inputs really reach the contract's score bound."""
from __future__ import annotations

import importlib

import pytest
import torch

from attnkit.judge.compare import STABILITY, tolerance, usage
from attnkit.judge.reference import reference
from attnkit.run.harness import execute
from attnkit.problems import all_problems, get
from attnkit.judge.registry import draw, with_hooks
from attnkit.run.hooks import for_reference
from attnkit.draw.scenarios import as_reference, cast
from attnkit.model.spec import SCORE_BOUND
from attnkit.grading import _preload

PROBLEMS = all_problems()
SEEDS = range(5)


def having(check):
    return [p for p in PROBLEMS if check in p.points]


def worst_usage(problem, group, dtype, tol, seeds=SEEDS):
    """The reference run in `dtype` on the CPU, against itself in float64: the worst fraction of `tol` used."""
    for name in _preload(problem):  # as a worker does before its first call (Triton's modules, imported uninterpreted)
        importlib.import_module(name)
    target, worst = reference(problem), 0.0
    for seed in seeds:
        for case in with_hooks(problem, draw(problem, [group], seed)).values():  # run as the grader runs its own
            call = for_reference(case.call)
            low = execute(dict(cast(call, dtype), device="cpu"), target)["outputs"][0]
            high = execute(as_reference(call), target)["outputs"][0]
            worst = max(worst, *(usage(g, e, tol) for g, e in zip(low, high)))
    return worst


@pytest.mark.parametrize("problem", having("parity_float32"), ids=lambda p: p.id)
def test_float32_reference_uses_under_a_tenth_of_the_tolerance(problem):
    assert worst_usage(problem, "f32", "float32", tolerance("float32")) < 0.1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("problem", having("cuda_half"), ids=lambda p: p.id)
def test_half_precision_reference_fits_the_half_tolerance(problem, dtype):
    """Measured on the CPU (the CUDA checks use the same bounds): at most half of the allowance."""
    assert worst_usage(problem, "half", dtype, tolerance(dtype)) < 0.5


@pytest.mark.parametrize("problem", having("stability"), ids=lambda p: p.id)
def test_stability_reference_in_float32_fits(problem):
    assert worst_usage(problem, "stable", "float32", STABILITY) < 0.1


def _scores(problem, case) -> float:
    """The largest |score| of a call, recomputed here for the problems that do not use masked_softmax."""
    args, state = as_reference(case.call)["args"], as_reference(case.call)["state"]
    if problem.id == "numpy_additive_attention":
        s_prev, h, W_a, U_a, v_a = args
        return (torch.tanh(W_a @ s_prev + h @ U_a.T) @ v_a).abs().max().item()
    if problem.id == "causal_self_attention":
        return _decoder_scores(case, args, state)
    q, k = args[0], args[1]
    if problem.id == "local_attention":  # the general score, q . (W_a k)
        return (q @ (k @ state["W_a.weight"].T).transpose(-2, -1)).abs().max().item()
    if k.dim() >= 3 and k.shape[-3] != q.shape[-3]:  # grouped-query heads: key head n // G for query head n
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
    if problem.id == "multihead_attention":
        H = case.call["ctor"]["args"][1]
        q = (q @ state["W_q.weight"].T + state["W_q.bias"]).unflatten(-1, (H, -1)).transpose(1, 2)
        k = (k @ state["W_k.weight"].T + state["W_k.bias"]).unflatten(-1, (H, -1)).transpose(1, 2)
    return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).abs().max().item()


def _decoder_scores(case, args, state) -> float:
    """causal_self_attention's largest |score| over every (new query, cached or new key) pair, masked or not (RoPE from the
    reference)."""
    rope = reference(get("rope"))
    (x, cache), cfg = args, case.cfg
    B, T, H, Hkv, d = x.shape[0], x.shape[1], cfg["H"], cfg["Hkv"], cfg["d"]
    P = 0 if cache is None else cache[0].shape[-2]
    positions = torch.arange(P, P + T)
    q = rope((x @ state["W_q.weight"].T).view(B, T, H, d).transpose(1, 2), positions, cfg["base"])
    k = rope((x @ state["W_k.weight"].T).view(B, T, Hkv, d).transpose(1, 2), positions, cfg["base"])
    if cache is not None:
        k = torch.cat((cache[0], k), dim=-2)
    k = k.repeat_interleave(H // Hkv, dim=1)
    return (q @ k.transpose(-2, -1) / d ** 0.5).abs().max().item()


FEATURES = ("linear_attention",)
"""Problems with no softmax whose contract bounds the inputs' features ([-8, 1e4]) instead of the scores."""
SOFTMAX_SPIED = ("attentional_decoder", "cross_attention", "paged_attention", "latent_attention")
"""References whose scores are read at their torch.softmax: a recurrence (the decoder scores with each step's h_t) or
a cache of projected keys, or a paged cache, which the test would otherwise compute again."""


@pytest.mark.parametrize("problem", having("stability"), ids=lambda p: p.id)
def test_stability_inputs_reach_the_contract_bound(problem, monkeypatch):
    """The largest |score| the stability calls produce is within [1e3, 1e4] (up to the float32 rounding of
    the inputs): loud, and inside the contract."""
    seen = []
    target = reference(problem)
    reference(get("masked_softmax"))  # loads attnkit_reference.masked_softmax, whichever test ran first
    softmax_module = __import__("attnkit_reference.masked_softmax", fromlist=["masked_softmax"])
    real = softmax_module.masked_softmax

    def spy(scores, valid_lens=None):
        seen.append(scores.detach().abs().max().item())
        return real(scores, valid_lens)

    if "masked_softmax" in problem.requires:
        monkeypatch.setattr(__import__(target.__module__, fromlist=["x"]), "masked_softmax", spy)
    softmax = torch.softmax

    def softmax_spy(scores, dim, *args, **kwargs):  # the scores a recurrent or cached reference builds on its own
        kept = scores.detach()[scores.detach() > torch.finfo(scores.dtype).min / 2]  # masked scores are filled
        seen.append(kept.abs().max().item() if kept.numel() else 0.0)
        return softmax(scores, dim, *args, **kwargs)

    spied = problem.id in SOFTMAX_SPIED
    if spied:
        monkeypatch.setattr(torch, "softmax", softmax_spy)
    for case in with_hooks(problem, draw(problem, ["stable"], 0)).values():
        out = execute(as_reference(for_reference(case.call)), spy if problem.id == "masked_softmax" else target)
        assert all((torch.isfinite(o) | ((o == float("-inf")) & (r.role == "lse"))).all()  # lse: -inf on an empty row
                   for o, r in zip(out["outputs"][0], problem.returns))
        if problem.id in FEATURES:  # its contract bounds the features of q and k, not products of them
            seen.append(max(a.abs().max().item() for a in case.call["args"][:2]))
            assert min(a.min().item() for a in case.call["args"][:2]) >= -8
        elif "masked_softmax" not in problem.requires and problem.id != "masked_softmax" and not spied:
            seen.append(_scores(problem, case))
    assert seen and 1e3 <= max(seen) <= SCORE_BOUND * (1 + 1e-6), seen
