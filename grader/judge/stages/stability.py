"""Check stability: finite and right for scores of magnitude ~1e4 in float32."""
from __future__ import annotations

import torch

from ..compare import STABILITY
from ..context import compare_all
from ..registry import Check, register
from ...draw.groups import group_stability


def check_stability(ctx):
    for case in ctx.of("stable"):
        got = ctx.outputs(case)
        for name, g in zip(ctx.problem.outputs, got):
            if not torch.isfinite(g).all():
                ctx.fail(case, f"{name} has NaN or inf with scores of magnitude ~1e4: subtract the row maximum before exp "
                         f"({'e - e.max()' if ctx.problem.arrays == 'numpy' else 'torch.softmax does this for you'})")
        compare_all(ctx, case, got, ctx.expected(case), STABILITY)


register(Check("stability", "finite and right for scores ~1e4 in float32", {"stable": group_stability}, check_stability,
               needs=lambda p: None if p.amplify is not None else "an amplify hook (scores of ~1e4)"))
