"""Check rope_properties: what a rotation by position must keep, whatever its convention. Reads the learner's
outputs only: the dot product of a query rotated at m and a key rotated at n depends only on m - n, and
every row keeps its norm."""
from __future__ import annotations

import torch

from ..compare import tolerance
from ..registry import Check, register
from ...draw.groups import case_key, each_case, with_args
from ...draw.scenarios import Case, base_call

START = 1000
"""The pair calls' first position: far enough from 0 that an offset error shows, near enough for float64."""


def group_rope_pairs(problem, seed):
    """Config 0 of each variant: x (2, T, d) whose rows are one query q (x[0, t] = q) and one key k (x[1, t] = k),
    at positions START .. START+T-1."""
    (x_at,), (pos_at,) = problem.arg_index("tensor"), problem.arg_index("positions")
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        g = gen("rope_pairs")
        call = base_call(problem, cfg, variant, g, None)
        qk = torch.randn(2, 1, cfg["d"], generator=g, dtype=torch.float64).expand(2, cfg["T"], cfg["d"]).clone()
        call = with_args(problem, call, {problem.arg_names[x_at]: qk,
                                         problem.arg_names[pos_at]: START + torch.arange(cfg["T"])})
        cases.append(Case(case_key("rope_pairs", vi, ci), "rope_pairs", variant, cfg, call))
    return cases


def check_rope_properties(ctx):
    tol = tolerance("float64")
    for case in ctx.of("rope_pairs"):
        x = case.call["args"][ctx.problem.arg_index("tensor")[0]]
        out = ctx.outputs(case)[0].to(torch.float64)
        norms, want = out.norm(dim=-1), x.norm(dim=-1)
        off = (norms - want).abs()
        if (off > tol.atol * 10 + tol.rtol * want).any():
            t = int(off.flatten().argmax()) % out.shape[1]
            ctx.fail(case, f"row {t} (position {START + t}) has norm {norms.flatten()[off.flatten().argmax()].item():.9g}, "
                     f"expected {want.flatten()[off.flatten().argmax()].item():.9g}: a rotation keeps every row's length "
                     "(each pair must turn as (a cos - b sin, a sin + b cos), with the same angle for a and b)")
        dots = out[0] @ out[1].T  # (T, T): q rotated at START+m . k rotated at START+n
        T = dots.shape[0]
        for shift in range(-(T - 1), T):
            diag = torch.diagonal(dots, -shift)  # entries with m - n = shift
            spread = (diag - diag[0]).abs().max().item()
            if spread > 1e-7 * max(1.0, diag.abs().max().item()):
                ctx.fail(case, f"q rotated at position m and k rotated at n: their dot product must depend only on "
                         f"m - n, but for m - n = {shift} it ranges over {diag.min().item():.9g} .. {diag.max().item():.9g} "
                         "(query and key must turn by angles proportional to their positions, with the same frequencies)")


register(Check("rope_properties", "relative positions: q(m) . k(n) depends on m - n; norms kept",
               {"rope_pairs": group_rope_pairs}, check_rope_properties,
               needs=lambda p: None if p.arg_index("tensor") and p.arg_index("positions")
               else "arguments with roles 'tensor' and 'positions'"))
