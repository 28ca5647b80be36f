"""Check recurrent_dropout: dropout on a recurrent module's output, where the dropped output is also what is fed to the
next step. eval() does nothing; train() with p = 0 is exact and with p = 1 gives zeros (and what zeros fed forward
give); with 0 < p < 1 each output is 0 or its undropped value / (1 - p), the undropped value computed by the spec's
replay from the learner's own outputs fed forward, so that only the dropped output fed forward passes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..compare import mismatch, same_values, tolerance
from ..context import compare_all
from ..registry import Check, options, register
from ...draw.groups import case_key, sequence_roles, with_args
from ...draw.scenarios import Case, base_call, generator, make_mask

DIMS = {"B": 2, "Tq": 5, "Tk": 3, "H": 1, "dq": 3, "dk": 4, "dv": 2, "h": 6}
P = ((0.0, "zero"), (1.0, "one"), (0.3, "some"), (0.6, "more"))
LARGE = {"B": 4, "Tq": 8, "Tk": 5, "H": 1, "dq": 3, "dk": 4, "dv": 2, "h": 32}
"""The call whose drops are counted (p = 0.3): 1,024 outputs, 32 rows of 32 features."""
Z = 6.0
"""How many standard deviations the drop count may stray from n*p: a correct dropout fails with probability 2e-9."""
UNIFORM = 3
"""Rows (or features) all kept or all dropped that fail the call: for 32 independent draws at p = 0.3 one happens with
probability 1.1e-5, three of 32 with probability below 1e-11; a dropout of whole rows (or of fixed features) makes
about ten."""


@dataclass(frozen=True)
class Replay:
    """The recurrent_dropout check's options: `replay(call, outputs)` -> (the undropped outputs, the weights, the
    returned state) that a float64 call gives when each step is fed the dropped output `outputs` returned at the step
    before (the learner's own)."""

    replay: Callable
    stepped: str | None = None  # the module's step method: train() also stepped through it, position by position


def group_recurrent_dropout(problem, seed):
    """The first variant (dropout acts on the output whatever the others change): eval() twice with dropout=0.5;
    train() with dropout 0, 1, 0.3 and 0.6 (seeded), 0.3 on larger dims twice in a row (the dropped share counted, and
    the second call's masks new), and with the constructor's default."""
    cases = []
    for vi, variant in enumerate(problem.variants[:1]):
        cfg = problem.fit(dict(DIMS), variant)
        gen = lambda *p, vi=vi: generator(seed, problem.id, vi, "recurrent_dropout", *p)  # noqa: E731
        call = base_call(problem, cfg, variant, gen(), make_mask(problem, "batch", cfg, gen("mask"), low=1))
        key = lambda *rest, vi=vi: case_key("recurrent_dropout", vi, "d", *rest)  # noqa: E731
        cases.append(Case(key("eval"), "recurrent_dropout", variant, cfg,
                          dict(call, ctor=problem.ctor_call(cfg, variant, dropout=0.5), repeat=2), lens="batch"))
        for p, name in P:
            train = dict(call, ctor=problem.ctor_call(cfg, variant, dropout=p), train=True, seed=7)
            cases.append(Case(key("train", name), "recurrent_dropout", variant, cfg, train, lens="batch",
                              meta={"p": p}, reference=p in (0.0, 1.0)))
        large = problem.fit(dict(LARGE), variant)
        counted = base_call(problem, large, variant, gen("large"), make_mask(problem, "batch", large, gen("large", "mask"),
                                                                              low=1))
        cases.append(Case(key("train", "counted"), "recurrent_dropout", variant, large,
                          dict(counted, ctor=problem.ctor_call(large, variant, dropout=0.3), train=True, seed=11,
                               repeat=2),  # twice in a row, without seeding in between: other outputs dropped
                          lens="batch", meta={"p": 0.3, "counted": True}, reference=False))
        method = options(problem, "recurrent_dropout").stepped
        if method:  # the same in train(), through the step method: the state it returns is what it feeds
            split, dim, carry, outs = sequence_roles(problem)
            hook = {"method": method, "split": split, "dim": dim, "carry": carry, "carry_outputs": outs}
            stepped = dict(call, ctor=problem.ctor_call(cfg, variant, dropout=0.3), train=True, seed=8, hooks={"steps": hook})
            if len(stepped["args"]) <= carry:
                stepped = with_args(problem, stepped, {problem.arg_names[carry]: None})
            cases.append(Case(key("train", "stepped"), "recurrent_dropout", variant, cfg, stepped, lens="batch",
                              meta={"p": 0.3, "stepped": method}, reference=False))
        cases.append(Case(key("train", "default"), "recurrent_dropout", variant, cfg,
                          dict(call, ctor=problem.ctor_call(cfg, variant), train=True, seed=9), lens="batch",
                          meta={"default": True}))
    return cases


def check_recurrent_dropout(ctx):
    tol = tolerance("float64")
    at = ctx.problem.out_index("values")
    replay = options(ctx.problem, "recurrent_dropout").replay
    counts = {"kept": 0, "dropped": 0}
    for case in ctx.of("recurrent_dropout"):
        got = ctx.outputs(case)
        if not case.call["train"]:
            for name, a, b in zip(ctx.problem.outputs, got, ctx.outputs(case, 1)):
                if not same_values(a, b):
                    ctx.fail(case, f"two calls in eval() gave different {name}: dropout must do nothing in eval() mode "
                             "(use nn.Dropout, or F.dropout(..., training=self.training))", symptom="dropout_in_eval")
            compare_all(ctx, case, got, ctx.expected(case), tol)
            continue
        p = case.meta.get("p", 0.0)
        if case.meta.get("default") or p in (0.0, 1.0):
            what = ("constructed without `dropout`, train() must give exactly the eval() result (the default is "
                    "dropout=0.0)" if case.meta.get("default") else f"with dropout={p} in train()")
            if p == 1.0 and got[at].abs().max() > 0:
                ctx.fail(case, f"with dropout=1.0 in train() every output must be 0 (each one dropped); got "
                         f"{got[at].abs().max().item():.6g} at most")
            for name, g, e in zip(ctx.problem.outputs, got, ctx.expected(case)):
                bad = mismatch(name, g, e, tol)
                if bad:
                    ctx.fail(case, f"{what}: {bad}")
            continue
        undropped, weights, state = replay(case.call, [o.to(torch.float64) for o in got])
        _judge(ctx, case, got[at].to(torch.float64), undropped, p, counts)
        if case.meta.get("counted"):
            _statistics(ctx, case, got[at] == 0, p)
            if same_values(got[at], ctx.outputs(case, 1)[at]):
                ctx.fail(case, "two calls in a row in train() gave the same outputs: dropout dropped the very same "
                         "outputs twice, where each call must draw new masks (a seed set inside forward, or masks kept "
                         "from the first call: use nn.Dropout, or F.dropout(..., training=self.training))")
        w_at = ctx.problem.weights_index
        bad = None if w_at is None else mismatch("weights", got[w_at], weights, tol)
        if bad:
            ctx.fail(case, "in train() the weights must be those the dropped outputs fed forward give (the weights "
                     f"themselves are not dropped): {bad}")
        carried = [i for i, o in enumerate(ctx.problem.returns) if o.role == "cache"]
        for i, e in zip(carried, state):
            bad = mismatch(ctx.problem.outputs[i], got[i], e, tol)
            if bad:
                ctx.fail(case, "in train() the returned state must be the last step's, its output the dropped one "
                         f"returned: {bad}")
    if ctx.of("recurrent_dropout") and (not counts["kept"] or not counts["dropped"]):
        case = [c for c in ctx.of("recurrent_dropout") if 0 < c.meta.get("p", 0) < 1][-1]
        ctx.fail(case, f"over {sum(counts.values())} outputs in train() with dropout=0.3 and 0.6, "
                 f"{'every one was kept' if counts['kept'] else 'every one was dropped'}: dropout must zero each with "
                 "probability p")


def _judge(ctx, case, got, undropped, p, counts) -> None:
    """Each output is 0 (dropped) or its undropped value / (1 - p) (kept)."""
    tol = tolerance("float64")
    kept = undropped / (1 - p)
    is_kept = (got - kept).abs() <= tol.atol * max(1.0, kept.abs().max().item()) + tol.rtol * kept.abs()
    is_dropped = got == 0
    wrong = ~(is_kept | is_dropped)
    if wrong.any():
        where = tuple(wrong.nonzero()[0].tolist())
        how = f" (called through {case.meta['stepped']}(), position by position)" if case.meta.get("stepped") else ""
        ctx.fail(case, f"with dropout={p} in train(){how}, output{list(where)} = {got[where].item():.6g}: each output "
                 f"must be 0 (dropped) or its undropped value / (1 - p) = {kept[where].item():.6g}, the undropped value "
                 "computed from the outputs you returned at the steps before, fed forward. The dropped output is the "
                 "one returned and the one fed to the next step; dropout acts on the output only")
    counts["kept"] += int((is_kept & ~is_dropped).sum())
    counts["dropped"] += int((is_dropped & (kept != 0)).sum())


def _statistics(ctx, case, dropped, p) -> None:
    """Independent drops at rate p: the count within Z standard deviations of n*p, and fewer than UNIFORM rows (or
    features) of the last two axes all kept or all dropped."""
    n = dropped.numel()
    k, mean, sd = int(dropped.sum()), n * p, (n * p * (1 - p)) ** 0.5
    if abs(k - mean) > Z * sd:
        ctx.fail(case, f"with dropout={p} in train(), {k} of {n} outputs were dropped, expected about {mean:.0f} "
                 f"(between {mean - Z * sd:.0f} and {mean + Z * sd:.0f}; a correct dropout falls outside with "
                 "probability 2e-9): each output must be zeroed with probability p, the module's `dropout`")
    rows = dropped.reshape(-1, dropped.shape[-1])
    for what, lines in (("rows", rows), ("features", rows.T)):
        uniform = int((lines.all(-1) | ~lines.any(-1)).sum())
        if uniform >= UNIFORM:
            ctx.fail(case, f"with dropout={p} in train(), {uniform} of {lines.shape[0]} {what} of the outputs were all "
                     f"kept or all dropped (independent draws give that for one in 90,000): dropout zeroes each output "
                     "on its own draw, not whole rows or fixed features")


register(Check("recurrent_dropout", "eval() exact; train(): the dropped output returned and fed forward",
               {"recurrent_dropout": group_recurrent_dropout}, check_recurrent_dropout, options=Replay,
               names=("dropout_in_eval",),
               needs=lambda p: None if (p.options or {}).get("recurrent_dropout") else "options['recurrent_dropout']"))
