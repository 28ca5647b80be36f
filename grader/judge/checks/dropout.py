"""Check dropout: eval() is exact, train() drops weights with probability p, weights are returned before dropout."""
from __future__ import annotations

import torch

from ..compare import mismatch, same_values, tolerance
from ..context import compare_all
from ..registry import Check, register
from ...draw.scenarios import as_reference
from .dropout_solve import affine_map, dropped_weights
from ...draw.describe import arg_name
from ...draw.groups import case_key
from ...draw.scenarios import Case, base_call, generator, make_mask


DROPOUT_DIMS = {"B": 4, "Tq": 8, "Tk": 3, "H": 2, "dq": 5, "dk": 4, "dv": 7, "h": 3}
"""Dims of the dropout calls: each output row (dv = 7, or E = H*dq = 10) has more entries than the
dropped weights that make it (H*Tk = 6), so the grader can solve the output for them (judge/checks/dropout_solve.py);
96 weights a call (and more with heads), so that the share dropout zeroes is measured (RATE_TAIL)."""


DROPOUT_P = ((0.3, 7), (0.3, 17), (0.6, 8), (0.6, 18))
"""(p, seed) of the train() calls: two values of p, so that a hard-coded p fails; two calls of 96 weights or more each,
so that a correct dropout keeps all or drops all of them with probability below 1e-7, and that the share it drops
tells p from 1 - p (RATE_TAIL). A further p is drawn from the run's seed (`seeded_p`), so that code that scales right
only for these two fails too."""

RATE_TAIL = 1e-7
"""The binomial tail below which the share of weights a train() call's dropout zeroed is no longer chance: for each
p, the zeroed weights of all its calls are counted (a correct dropout fails this with probability below RATE_TAIL
per p; one that keeps each weight with probability p instead of 1 - p, at p = 0.3, fails it with 100 weights)."""


def seeded_p(seed, problem) -> float:
    """A dropout probability in [0.15, 0.85], two decimals, drawn from the run's seed (never 0.3 or 0.6)."""
    u = float(torch.rand((), generator=generator(seed, problem.id, "dropout", "p"), dtype=torch.float64))
    p = round(0.15 + 0.7 * u, 2)
    return p + 0.01 if p in (0.3, 0.6) else p


def group_dropout(problem, seed):
    """Each variant: eval() twice with dropout=0.5, train() once per DROPOUT_P (the first twice in a row, without
    seeding in between: a second training step drops other weights), train() with the constructor's default
    dropout (0.0: exactly the eval() result), and with dropout=1.0 (every weight dropped: the reference's result)."""
    cases = []
    for vi, variant in enumerate(problem.variants):
        cfg = problem.fit(dict(DROPOUT_DIMS), variant)
        gen = lambda *p, vi=vi: generator(seed, problem.id, vi, "dropout", *p)  # noqa: E731
        call = base_call(problem, cfg, variant, gen(), make_mask(problem, "batch", cfg, gen("lens"), low=1))
        key = lambda *rest, vi=vi: case_key("dropout", vi, "d", *rest)  # noqa: E731
        eval_call = dict(call, ctor=problem.ctor_call(cfg, variant, dropout=0.5), repeat=2)
        cases.append(Case(key("eval"), "dropout", variant, cfg, eval_call, lens="batch"))
        for i, (p, s) in enumerate(DROPOUT_P + ((seeded_p(seed, problem), 10),)):
            train = dict(call, ctor=problem.ctor_call(cfg, variant, dropout=p), train=True, seed=s,
                         repeat=2 if i == 0 else 1)  # the first: twice in a row, which must drop other weights
            cases.append(Case(key("train", i), "dropout", variant, cfg, train, lens="batch", meta={"p": p}))
        default = dict(call, ctor=problem.ctor_call(cfg, variant), train=True, seed=9)  # the default: no dropout
        cases.append(Case(key("train", "default"), "dropout", variant, cfg, default, lens="batch"))
        every = dict(call, ctor=problem.ctor_call(cfg, variant, dropout=1.0), train=True, seed=12)  # all dropped
        cases.append(Case(key("train", "one"), "dropout", variant, cfg, every, lens="batch", meta={"all": True}))
    return cases


def check_dropout(ctx):
    tol = tolerance("float64")
    counts = {"kept": 0, "dropped": 0}
    rates: dict = {}  # p -> [kept, dropped, the last case]
    for case in (c for c in ctx.of("dropout") if not c.meta.get("all")):  # dropout=1.0: after the shares dropped
        if not case.call["train"]:
            first, second = ctx.outputs(case), ctx.outputs(case, 1)
            changed = ctx.result(case).changed
            for name, a, b in zip(ctx.problem.outputs, first, second):
                if not same_values(a, b) and changed:  # the second call saw other inputs: no evidence on dropout
                    ctx.fail(case, f"two calls in eval() gave different {name}, and the calls modified their input "
                             f"`{arg_name(ctx.problem, case.call, changed[0])}` in place, so the second one saw other "
                             "values: work on a copy first (side_effects says where)")
                elif not same_values(a, b):
                    ctx.fail(case, f"two calls in eval() gave different {name}: dropout must do nothing in eval() mode "
                             "(use nn.Dropout, or F.dropout(..., training=self.training))", symptom="dropout_in_eval")
            compare_all(ctx, case, first, ctx.expected(case), tol)
            continue
        if "p" not in case.meta:  # the constructor's default dropout is 0.0: train() is exact too
            for name, g, e in zip(ctx.problem.outputs, ctx.outputs(case), ctx.expected(case)):
                bad = mismatch(name, g, e, tol)
                if bad:
                    ctx.fail(case, "constructed without `dropout`, train() must give exactly the eval() result "
                             f"(the default is dropout=0.0)\n{bad}")
            continue
        at_w = ctx.problem.weights_index
        got = ctx.outputs(case)
        out, w = got[ctx.problem.out_index("values")], got[at_w]
        expected_w = ctx.expected(case)[at_w]
        problem = mismatch("weights", w, expected_w, tol)
        if problem:
            dropped = _a_dropped_copy(w, expected_w, case.meta["p"])
            ctx.fail(case, f"in train() the returned weights must be taken before dropout (they still sum to 1)\n{problem}"
                     + ("" if dropped else _what_differs(w, expected_w)),
                     symptom="weights_after_dropout" if dropped else None)
        kept, dropped, alike = _judge_dropped(ctx, case, out)
        if case.call.get("repeat", 1) > 1 and same_values(out, ctx.outputs(case, 1)[ctx.problem.out_index("values")]):
            ctx.fail(case, "two calls in a row in train() gave the same output: dropout dropped the very same weights "
                     "twice, where each call must draw a new mask (a seed set inside forward, torch.manual_seed or a "
                     "generator of one's own seeded on each call, or a mask kept from the first call: use "
                     "nn.Dropout, or F.dropout(..., training=self.training))")
        counts["kept"], counts["dropped"] = counts["kept"] + kept, counts["dropped"] + dropped
        rate = rates.setdefault(case.meta["p"], [0, 0, case, {}])
        rate[0], rate[1], rate[2] = rate[0] + kept, rate[1] + dropped, case
        for axis, (same, pairs) in alike.items():
            total = rate[3].setdefault(axis, [0, 0])
            total[0], total[1] = total[0] + same, total[1] + pairs
    _judge_shares(ctx, rates, counts)
    for case in (c for c in ctx.of("dropout") if c.meta.get("all")):  # every weight dropped: the reference's result
        for name, g, e in zip(ctx.problem.outputs, ctx.outputs(case), ctx.expected(case)):
            bad = mismatch(name, g, e, tol)
            if bad:
                ctx.fail(case, "with dropout=1.0 in train() every weight is dropped: the output is what weights of 0 "
                         "give, and the returned weights are those before dropout (nn.Dropout(1.0) gives zeros; a "
                         f"mask scaled by 1/(1-p) divides by 0 there)\n{bad}")


def _judge_shares(ctx, rates, counts) -> None:
    """The share of weights dropped per p, the agreement along each axis of AXES, and none kept or none dropped at
    all, over every train() call with a p."""
    for p, (kept, dropped, case, alike) in rates.items():
        agree = p * p + (1 - p) ** 2  # two decisions on one weight alike, drawn independently
        for axis, (same, pairs) in alike.items():
            if pairs and same > agree * pairs and _binomial_tail(pairs, same, agree) < RATE_TAIL:
                ctx.fail(case, f"in train() with dropout={p}, the {AXES[axis][0]} dropped the same weights: of {pairs} "
                         f"weights that two {AXES[axis][0]} ({AXES[axis][1]} 0 and 1, 2 and 3, ...) both hold, {same} "
                         f"were kept or dropped alike in both ({same / pairs:.0%}), where masks drawn independently "
                         f"agree on {agree:.0%}: each {AXES[axis][1]} needs a mask of its own ({AXES[axis][2]})")
        n = kept + dropped
        if n and _binomial_tail(n, dropped, p) < RATE_TAIL:
            ctx.fail(case, f"in train() with dropout={p}, {dropped} of {n} attention weights were zeroed "
                     f"({dropped / n:.0%}), where dropout zeroes each with probability p = {p:.0%} (and keeps it with "
                     f"probability 1 - p): a share this far from p comes by chance with probability below "
                     f"{RATE_TAIL:g}" + (" (the mask keeps a weight with probability p: compare with `rand() >= p`, "
                                         "or use nn.Dropout)" if abs(dropped / n - (1 - p)) < abs(dropped / n - p) else ""))
    if ctx.of("dropout") and (not counts["kept"] or not counts["dropped"]):
        case = [c for c in ctx.of("dropout") if c.call["train"] and "p" in c.meta][-1]
        what = "every weight was kept" if counts["kept"] else "every weight was dropped"
        ctx.fail(case, f"over {sum(counts.values())} attention weights in train() with dropout=0.3 and 0.6, {what}: "
                 "dropout must zero each weight with probability p (a correct dropout does this by chance with "
                 "probability below 1e-7)")


def _binomial_tail(n: int, k: int, p: float) -> float:
    """Twice the smaller tail of Binomial(n, p) at k (P(X <= k) or P(X >= k)), at most 1: how unlikely k is."""
    import math

    def pmf(i):
        if p in (0.0, 1.0):
            return float(i == (n if p == 1.0 else 0))
        return math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                        + i * math.log(p) + (n - i) * math.log1p(-p))

    low, high = sum(pmf(i) for i in range(k + 1)), sum(pmf(i) for i in range(k, n + 1))
    return min(1.0, 2 * min(low, high))


def _ratios(dropped, weights, p: float):
    """(ratio, kept, dropped): dropped / weights where the weight is large enough for the ratio to be well determined
    (above 1e-3), and which of those ratios are a kept weight's (1/(1-p)) or a dropped one's (0)."""
    live = weights > 1e-3
    ratio, scale = dropped[live] / weights[live], 1.0 / (1.0 - p)
    return ratio, (ratio - scale).abs() < 1e-6 * scale, ratio.abs() < 1e-6


def _a_dropped_copy(got, expected, p: float) -> bool:
    """Whether the returned weights are the expected ones through dropout: each 0 or scaled by 1/(1-p)."""
    if got.shape != expected.shape or not torch.isfinite(got).all():
        return False
    ratio, kept, dropped = _ratios(got, expected, p)
    return bool(ratio.numel()) and bool((kept | dropped).all())


def _what_differs(got, expected) -> str:
    """What the returned weights show where they are no dropped copy of the expected ones."""
    if got.shape != expected.shape or not torch.isfinite(got).all():
        return ""
    rows = expected.sum(-1) > 0.5  # rows with an allowed key (the others are all zeros)
    sums = got.sum(-1)[rows]
    if rows.any() and ((sums - 1).abs() < 1e-9).all():
        return ("\nYours still sum to 1 in every row, and they are no dropped copy of the expected weights (each 0 or "
                "scaled by 1/(1-p)): dropout did not act on the returned weights; what went into the softmax changed "
                "in train() mode")
    return ""


AXES = {0: ("batch rows", "row", "dropout on the whole weights tensor, not one mask of weights.shape[1:] for the "
                                  "batch"),
        1: ("heads", "head", "dropout on the (B, H, Tq, Tk) weights, not a (B, 1, Tq, Tk) mask broadcast over H")}
"""The axes along which two weights' dropout decisions must be independent: (what, one of them, how)."""


def _judge_dropped(ctx, case, out) -> tuple[int, int, dict]:
    """The output must be G(D * weights): solve it for the dropped weights P and check each P / weight. Returns how
    many well-determined weights were kept and how many dropped, and for each axis of AXES the weights have (batch;
    heads where the weights are (B, H, Tq, Tk)): (how many of the weights that two rows 2k and 2k + 1 both hold were
    kept or dropped alike in both, of how many)."""
    reveal, p = ctx.ref[case.key].extra["reveal"], case.meta["p"]
    P, residual = dropped_weights(reveal, out)
    w = reveal["weights"]
    scale = 1.0 / (1.0 - p)
    if residual > 1e-7 * max(1.0, out.abs().max().item()):
        ctx.fail(case, f"in train() with dropout={p}, the output is not (dropout applied to the weights) @ values: "
                 f"no dropped weights explain it (off by {residual:.3g}). Dropout acts on the attention weights, "
                 "after the softmax and before they multiply the values; not on the scores, the values or the output",
                 symptom="dropout_misplaced")
    at_masked = (w == 0) & (P.abs() > 1e-9)
    if at_masked.any():
        at = tuple(at_masked.nonzero()[0].tolist())
        ctx.fail(case, f"in train() the dropped weights at masked key {list(at)} are {P[at].item():.6g}: a masked "
                 "weight is 0 and stays 0 after dropout")
    ratio, kept, dropped = _ratios(P, w, p)
    bad = ~(kept | dropped)
    if bad.any() and bool(((ratio - 1).abs() < 1e-6).all()):
        ctx.fail(case, f"in train() with dropout={p}, every attention weight came through unchanged (none zeroed, none "
                 f"scaled by 1/(1-p) = {scale:.6g}): dropout did not act on the weights (the module's dropout is never "
                 "applied, or applied with p = 0)")
    elif bad.any():
        others = ratio[bad]
        common = others.mean().item()
        same = (others - common).abs().max().item() < 1e-6 * abs(common) and common > 1
        why = (f"kept weights are scaled by {common:.6g} = 1/(1-{1 - 1 / common:.4g}), expected 1/(1-{p}) = {scale:.6g}: "
               f"dropout must use p = {p}, the module's `dropout` argument" if same else
               f"dropped weights / weights = {others[0].item():.6g} at a kept entry, expected 0 or 1/(1-p) = {scale:.6g}")
        ctx.fail(case, f"in train() with dropout={p}: {why}", symptom="dropout_wrong_p" if same else None)
    axes = [a for a in AXES if P.dim() >= 3 and (a == 0 or P.dim() == 4) and P.shape[a] >= 2]
    return int(kept.sum()), int(dropped.sum()), {a: _alike(P, w, p, a) for a in axes}


def _alike(P, w, p: float, axis: int) -> tuple[int, int]:
    """(alike, pairs): over the weights that rows 2k and 2k + 1 of `axis` both hold well determined (above 1e-3) at
    one index of the other axes, each a kept or a dropped one, how many were kept in both or dropped in both."""
    scale, live = 1.0 / (1.0 - p), w > 1e-3
    ratio = torch.where(live, P / torch.where(live, w, torch.ones_like(w)), torch.zeros_like(w))
    kept, held = live & ((ratio - scale).abs() < 1e-6 * scale), live & (((ratio - scale).abs() < 1e-6 * scale)
                                                                       | (ratio.abs() < 1e-6))
    n = P.shape[axis] // 2 * 2  # disjoint pairs (0, 1), (2, 3), ...: independent draws for a correct dropout
    first, second = (torch.arange(0, n, 2), torch.arange(1, n, 2))
    both = held.index_select(axis, first) & held.index_select(axis, second)
    alike = both & (kept.index_select(axis, first) == kept.index_select(axis, second))
    return int(alike.sum()), int(both.sum())


def _reveal(problem, cases, target, refs) -> None:
    """Where dropout acts, for each train() call with a p: the reference's output as a function of its dropped
    weights (refs[key]["reveal"])."""
    for k, c in cases.items():
        if c.group == "dropout" and "p" in c.meta:
            refs[k]["reveal"] = affine_map(target, as_reference(c.call), problem.weights_index, problem.out_index("values"))


register(Check("dropout", "eval() exact; train() drops; weights pre-dropout", {"dropout": group_dropout}, check_dropout,
               expected=_reveal,
               names=("dropout_in_eval", "weights_after_dropout", "dropout_misplaced", "dropout_wrong_p"),
               needs=lambda p: None if p.is_module and p.weights_index is not None and p.out_index("values") is not None
               else "a module problem with outputs with roles 'values' and 'weights'"))
