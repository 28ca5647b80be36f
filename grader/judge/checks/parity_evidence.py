"""What the general calls (the base group, parity_float64's) show in words, where no catalogued mistake is named:
only some masking forms fail (the mask rule's words for them), float32 rounding inside a float64 computation,
weights of another shape or with the heads in another order, masked keys that receive weight."""
from __future__ import annotations

import torch

from ..compare import tolerance, usage
from ..context import valid_mask
from ...masks import rule
from .parity_symptoms import _float32_rounding_only, _kinds, _ok


def _heads_moved(w, e) -> str | None:
    """Per-head weights (B, H, Tq, Tk) that are the reference's heads in another order."""
    if w.dim() != 4 or w.shape[1] < 2 or usage(w, e, tolerance("float64")) <= 1:
        return None
    H = w.shape[1]
    order = []
    for n in range(H):
        match = [m for m in range(H) if usage(w[:, n], e[:, m], tolerance("float64")) <= 1]
        if not match:
            return None
        order.append(match[0])
    return f"your head n holds the expected head {order}[n]: the heads come out in another order (check how the " \
           "projections are split into heads: view(B, T, H, d), not view(B, T, d, H))"


def _controlled(ctx, bad, good) -> bool:
    """Some variant has a wrong call of a failing form beside a right call of a passing one: the form, not the variant
    (ALiBi's given slopes against the paper's), is what the failures follow."""
    from .parity_symptoms import _plain, _right

    cells: dict = {}
    for case in ctx.of("base"):
        if _plain(case):
            cells.setdefault(case.key.split("/")[1], []).append((case.lens, _right(ctx, case)))
    return any(any(k in bad and not ok for k, ok in calls) and any(k in good and ok for k, ok in calls)
               for calls in cells.values())


def evidence(problem, ctx) -> list[str]:
    """What the results show, in words, for the learner to start from when no mistake is named."""
    lines = []
    bad, good = _kinds(ctx)
    words = rule(problem).words
    if bad and good and all(k in words for k in bad | good) and _controlled(ctx, bad, good):
        lines.append(f"only calls with {', '.join(words[k] for k in sorted(bad))} go wrong; calls with "
                     f"{', '.join(words[k] for k in sorted(good))} are right")
    if _float32_rounding_only(ctx):
        lines.append("the float64 results are off by float32 rounding only: a float32 constant, tensor or cast "
                     "inside a float64 computation (torch.tensor(x) without dtype=, .float(), "
                     "torch.finfo(torch.float32))")
    for case in ctx.of("base"):
        res = _ok(ctx, case)
        ref = ctx.ref.get(case.key)
        at = problem.weights_index
        if res is None or ref is None or at is None:
            continue
        w, e = res.outputs[at], ref.outputs[at]
        if w.shape != e.shape:
            swapped = w.shape[:-2] + w.shape[-2:][::-1] == e.shape
            lines.append(f"the weights come back as {tuple(w.shape)} where {tuple(e.shape)} is expected"
                         + (": the last two axes (Tq, Tk) are swapped" if swapped else ""))
            break
        mask = valid_mask(problem, case).expand(e.shape)
        moved = _heads_moved(w.to(torch.float64), e.to(torch.float64))
        if moved:
            lines.append(moved)
            break
        if ((w.to(torch.float64) != 0) & ~mask).any():
            lines.append("masked keys receive weight: the mask is not applied, or applied to the wrong positions")
            break
    return lines
