"""Error shapes whose cause is certain, named only where the catalogue has that mistake:
NaN exactly on the fully masked rows, such rows left uniform, inputs changed in place,
non-finite values only for large scores, rows that sum to 1 over the wrong axis."""
from __future__ import annotations

import torch

from .context import valid_mask
from .problems import get


def pattern(problem, ctx, cid) -> str | None:
    """Error shapes whose cause is certain, named only where the catalogue has that mistake."""
    ids = {m.id for m in problem.mistakes} | {f"{d}:{m.id}" for d in problem.requires for m in get(d).mistakes}

    def known(mid):
        for rid in (mid, f"masked_softmax:{mid}"):
            if rid in ids:
                return rid
        return None

    if cid == "no_torch":
        return known("imports_torch")
    if cid == "side_effects":
        if any(r.get("ok") and r.get("changed") for r in ctx.got.values()):
            return known("in_place")
    if cid in ("weight_sums", "parity_float64", "parity_float32"):
        rows = _fully_masked_rows(problem, ctx)
        if rows is not None:
            nan, uniform = rows
            if nan:
                return known("nan_rows")
            if uniform:
                return known("uniform_rows")
    if cid in ("weight_sums", "parity_float64", "parity_float32") and _sums_along_wrong_axis(problem, ctx):
        return known("wrong_axis")
    if cid == "stability":
        base_ok = all(torch.isfinite(o).all() for c in ctx.of("base") if (r := ctx.got.get(c.key)) and r["ok"]
                      for o in r["outputs"][0])
        stable_bad = any(not torch.isfinite(o).all() for c in ctx.of("stable") if (r := ctx.got.get(c.key)) and r["ok"]
                         for o in r["outputs"][0])
        if base_ok and stable_bad:
            return known("no_max_subtraction")
    return None


def _fully_masked_rows(problem, ctx):
    """(NaN exactly on rows with no valid key, such rows uniform): checked over the base calls."""
    nan_rows = uniform_rows = seen = 0
    for case in ctx.of("base"):
        res = ctx.got.get(case.key)
        if not res or not res["ok"]:
            continue
        w = res["outputs"][0][-1].to(torch.float64)
        mask = valid_mask(problem, case)
        if w.shape != mask.expand(w.shape).shape if w.dim() == mask.dim() else True:
            return None
        mask = mask.expand(w.shape)
        empty = ~mask.any(-1)
        if not empty.any():
            continue
        seen += 1
        if torch.isnan(w[~empty]).any():
            return None
        rows = w[empty]
        nan_rows += bool(torch.isnan(rows).all())
        uniform_rows += bool(torch.allclose(rows, torch.full_like(rows, 1.0 / w.shape[-1])))
    if not seen:
        return None
    return nan_rows == seen, uniform_rows == seen


def _sums_along_wrong_axis(problem, ctx) -> bool:
    """Some unmasked base call's weights fail to sum to 1 over keys but do sum to 1 over queries."""
    found = False
    for case in ctx.of("base"):
        res = ctx.got.get(case.key)
        if case.lens != "none" or not res or not res["ok"] or case.cfg["Tq"] == case.cfg["Tk"]:
            continue
        w = res["outputs"][0][-1].to(torch.float64)
        if w.dim() < 3:
            continue
        one = torch.ones((), dtype=torch.float64)
        over_keys = torch.allclose(w.sum(-1), one, atol=1e-6)
        over_queries = torch.allclose(w.sum(-2), one, atol=1e-6)
        if over_keys:
            return False
        found |= over_queries
    return found
