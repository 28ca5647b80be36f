"""The hidden inputs cover everything the contract allows, over many seeds: every mask form, B != H,
prime sizes, valid scores far below 0 beside masked keys, partial last blocks along every axis a learner
may chunk, and memory calls that can each catch the tensor they guard against."""
from __future__ import annotations

import pytest
import torch

from attnkit.draw.groups import NEGATIVE
from attnkit.judge.registry import draw
from attnkit.problems import all_problems, get
from attnkit.problems.chunked_additive_attention import full_tensor
from attnkit.draw.scenarios import draw_configs, output_shapes

SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_configs_hold_the_edge_cases(seed):
    configs = draw_configs(seed)
    assert any(c["B"] == 1 for c in configs) and any(c["Tq"] == 1 for c in configs) and any(c["Tk"] == 1 for c in configs)
    assert all(c["B"] != c["H"] for c in configs if c["B"] > 1 and c["H"] > 1)
    general = configs[0]
    assert general["Tq"] != general["Tk"] and all(n in (5, 7, 11) for n in (general["Tq"], general["Tk"]))


def _mask_shapes(pid, seed):
    problem = get(pid)
    return {(case.variant.get("rank"), tuple(case.call["args"][problem.mask_index].shape))
            for case in draw(problem, ["base"], seed).values() if case.call["args"][problem.mask_index] is not None}


def test_multihead_attention_draws_every_broadcastable_mask_form():
    cfg = get("multihead_attention").fit(draw_configs(0)[0], {})
    B, H, Tq, Tk = cfg["B"], cfg["H"], cfg["Tq"], cfg["Tk"]
    shapes = {s for _, s in _mask_shapes("multihead_attention", 0)}
    for shape in [(Tk,), (Tq, Tk), (H, Tq, Tk), (1, H, Tq, Tk), (B, 1, 1, Tk), (B, 1, Tq, Tk), (B, H, Tq, Tk)]:
        assert shape in shapes, (shape, sorted(shapes))


def test_scaled_dot_product_attention_draws_masks_with_fewer_dims_than_the_scores():
    shapes = _mask_shapes("scaled_dot_product_attention", 0)
    for rank in (2, 3, 4):
        dims = {len(s) for r, s in shapes if r == rank}
        assert dims == set(range(1, rank + 1)), (rank, dims)


@pytest.mark.parametrize("pid", ["masked_softmax", "scaled_dot_product_attention", "multihead_attention"])
def test_valid_scores_far_below_zero_sit_beside_masked_keys(pid):
    """A fill of 0 followed by renormalisation loses these rows: the calls exist in float64 and at -1e4 in float32."""
    from attnkit.draw.scenarios import as_reference

    problem = get(pid)
    cases = [c for c in draw(problem, ["base", "stable"], 0).values() if "negative" in c.tags]
    assert {c.group for c in cases} == {"base", "stable"}
    for case in cases:
        scores = _scores(problem, as_reference(case.call))
        mask = case.call["args"][problem.mask_index]
        allowed = mask.expand(scores.shape) if mask.dtype == torch.bool else _lens_mask(mask, scores.shape)
        valid = scores[allowed]
        target_value = NEGATIVE if case.group == "base" else -1e4
        assert valid.max() < target_value / 2 and (~allowed).any(), (case.key, valid.max())
        assert valid.abs().max() <= 1e4


def _lens_mask(lens, shape):
    per_query = lens[:, None] if lens.dim() == 1 else lens
    return (torch.arange(shape[-1]) < per_query[..., None]).expand(shape)


def _scores(problem, call):
    args = call["args"]
    if problem.id == "masked_softmax":
        return args[0]
    if problem.id == "scaled_dot_product_attention":
        return args[0] @ args[1].transpose(-2, -1) / args[0].shape[-1] ** 0.5
    s, (B, Tq, _), H = call["state"], args[0].shape, call["ctor"]["args"][1]  # MultiHeadAttention(E, H)
    q = (args[0] @ s["W_q.weight"].T + s["W_q.bias"]).view(B, Tq, H, -1).transpose(1, 2)
    k = (args[1] @ s["W_k.weight"].T + s["W_k.bias"]).view(B, args[1].shape[1], H, -1).transpose(1, 2)
    return q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5


@pytest.mark.parametrize("seed", SEEDS)
def test_chunked_blocks_leave_a_partial_last_block_on_every_axis(seed):
    """For blocks of triples, of query rows and of keys, counted per batch row or across it, some base call's
    max_elements gives a block size that does not divide the axis."""
    problem = get("chunked_additive_attention")
    cases = [c for c in draw(problem, ["base"], seed).values() if "/c0/" in c.key and "block" in c.tags]
    B, Tq, Tk, h = (cases[0].cfg[n] for n in ("B", "Tq", "Tk", "h"))
    sizes = [c.call["args"][-1] for c in cases]
    axes = {
        "triples": (lambda m: m // h, B * Tq * Tk),
        "query rows": (lambda m: m // (Tk * h), Tq),
        "query rows, batch folded": (lambda m: m // (B * Tk * h), Tq),
        "rows of (b, i)": (lambda m: m // (Tk * h), B * Tq),
        "keys": (lambda m: m // (Tq * h), Tk),
        "keys, batch folded": (lambda m: m // (B * Tq * h), Tk),
    }
    for name, (block, n) in axes.items():
        assert any(1 < block(m) < n and n % block(m) for m in sizes), (name, sizes, (B, Tq, Tk, h))


@pytest.mark.parametrize("seed", range(200))
def test_every_memory_call_can_catch_the_full_tensor(seed):
    problem = get("chunked_additive_attention")
    cases = list(draw(problem, ["memory"], seed).values())
    assert len([c for c in cases if c.key != "memory/backstop"]) >= 6
    for case in cases:
        assert full_tensor(case.cfg) > case.meta["allowed"], (case.key, case.cfg, case.meta)


def test_dropout_calls_let_the_grader_solve_for_the_dropped_weights():
    """The output of each train() call determines its dropped weights (full column rank), for every module."""
    from attnkit.judge.checks.dropout import DROPOUT_P
    from attnkit.judge.expected import expected
    from attnkit.judge.plan import Plan

    for problem in all_problems():
        if "dropout" not in problem.points:
            continue
        refs = expected(Plan.draw([problem], 0), problem)
        reveals = [r["reveal"] for r in refs.values() if "reveal" in r]
        assert len(reveals) == (len(DROPOUT_P) + 1) * len(problem.variants)  # and the seeded p
        for reveal in reveals:
            A = reveal["A"]
            assert torch.linalg.matrix_rank(A) == A.shape[1], problem.id


def test_output_shapes_follow_the_drawn_configs():
    for problem in all_problems():
        for case in draw(problem, ["base"], 0).values():
            assert all(all(n >= 1 for n in s) for s in output_shapes(problem, case.cfg))
