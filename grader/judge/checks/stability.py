"""Check stability: finite and right for scores of magnitude ~1e4 in float32."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..compare import STABILITY
from ..context import compare_all, returns_arrays, valid_mask
from ..registry import Check, options, register
from ...draw.groups import case_key, each_case, form, negative_cases, with_args
from ...draw.long import FAR, TALL, long_cases
from ...draw.scenarios import Case, base_call, cast, make_lens, make_mask
from ...masks import rule
from ...model.spec import SCORE_BOUND


@dataclass(frozen=True)
class Amplify:
    """The stability check's options: `amplify(args, state, cfg)` scales a float64 call in place so that its scores
    reach about 1e4 (SCORE_BOUND); cfg holds the variant. `split(args, state, cfg, masked, lo, hi)` (None: not
    possible) moves the scores of the keys `masked` (B, Tk) to about `hi` and every other key's to about `lo`, in
    place: valid scores near -1e4 beside masked ones near +1e4, where an additive bias of -1e4 leaves masked keys
    the largest scores. `long`: also a float32 call of draw/long.py's sizes (67 queries after 1031 keys), where keys
    taken 64 or 512 at a time and merged under the first part's maximum, not the running one, overflow;
    `long_args`, arguments those long calls take instead of the drawn ones (a sliding window of hundreds of keys, so
    that a block meets more keys than code may take at a time)."""

    amplify: Callable
    split: Callable | None = None
    long: bool = False
    long_args: dict | None = None


LOW = -0.9999 * SCORE_BOUND
"""Where valid scores sit in the negative and split calls: within 1 of -1e4, so that masked keys filled with -1e4
(BERT's constant) weigh as much as valid ones there (a fill 10 below them leaked only exp(-10), inside the tolerance)."""


def group_stability(problem, seed):
    """float32 and float64 with scores of magnitude ~1e4, and (where the spec can arrange it) float32 with every valid
    score near -1e4 next to masked keys."""
    cases = negative_cases(problem, seed, "stable", LOW, "float32")
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        call = base_call(problem, cfg, variant, gen("stable"), make_mask(problem, "query", cfg, gen("slens")))
        options(problem, "stability").amplify(call["args"], call["state"], {**cfg, **variant})
        cases.append(Case(case_key("stable", vi, ci), "stable", variant, cfg, cast(call, "float32"), lens=form(problem, "query")))
        cases.append(Case(case_key("stable", vi, ci, "float64"), "stable", variant, cfg, cast(call, "float64"),
                          lens=form(problem, "query"), tags=frozenset({"float64"})))  # exp(1e4) overflows float64 too
    if options(problem, "stability").long:  # and past the key chunks (FAR: 8209 keys) and query blocks (TALL) of tiled
        for case in long_cases(problem, seed, "stable") + long_cases(problem, seed, "stable", sizes=FAR, name="far", after_short=True) \
                + long_cases(problem, seed, "stable", sizes=TALL, name="tall"):  # code, where a stale maximum overflows
            if options(problem, "stability").long_args:
                case.call = with_args(problem, case.call, options(problem, "stability").long_args)
            options(problem, "stability").amplify(case.call["args"], case.call["state"], {**case.cfg, **case.variant})
            case.call = cast(case.call, "float32")
            cases.append(case)
    split = options(problem, "stability").split
    if split is not None:
        cases += _split_cases(problem, seed, split)
    for case in cases:
        case.tol = STABILITY
    return cases


def _split_cases(problem, seed, split):
    """Config 0 with a key padding mask (the problem's per-batch form), valid scores near -1e4 and masked ones near
    +1e4: both within the contract's bound, and the masked keys still get exactly 0; in float32 and float64."""
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        g = gen("stable", "split")
        lens = make_lens("batch", cfg, g, low=1)
        call = base_call(problem, cfg, variant, g, rule(problem).from_lengths(problem, cfg, lens))
        masked = torch.arange(cfg["Tk"])[None, :] >= lens[:, None]  # (B, Tk)
        split(call["args"], call["state"], {**cfg, **variant}, masked, LOW, -LOW)
        for dtype in ("float32", "float64"):  # a fill that is far enough below in one dtype only fails the other
            cases.append(Case(case_key("stable", vi, ci, "split", dtype), "stable", variant, cfg, cast(call, dtype),
                              lens=form(problem, "batch"), tags=frozenset({"split"})))
    return cases


def _nonfinite_where(ctx, cases) -> bool:
    """Does the learner's code return NaN or inf on any of `cases` where the reference does not?"""
    for case in cases:
        got, ref = ctx.got.get(case.key), ctx.ref.get(case.key)
        if got is None or ref is None or not got.has_outputs:
            continue
        if any(g.shape == e.shape and (~torch.isfinite(g) & torch.isfinite(e)).any()
               for g, e in zip(got.outputs, ref.outputs)):
            return True
    return False


def _nonfinite_at_ordinary_scale(ctx) -> bool:
    """NaN or inf on a general call (ordinary scores) where the reference has none? Then NaN at ~1e4 says nothing of
    the scores' size."""
    return _nonfinite_where(ctx, [c for c in ctx.cases.values() if c.group in ("base", "f32")])


def _short_calls_finite(ctx) -> bool:
    """Are the other stability calls' outputs finite wherever the reference's are (only the long call overflows)?"""
    return not _nonfinite_where(ctx, [c for c in ctx.of("stable") if "long" not in c.tags])


def check_stability(ctx):
    for case in ctx.of("stable"):
        got, expected = ctx.outputs(case), ctx.expected(case)
        for name, g, e in zip(ctx.problem.outputs, got, expected):
            if g.shape == e.shape and (~torch.isfinite(g) & torch.isfinite(e)).any():  # lse is -inf on an empty row
                if _nonfinite_at_ordinary_scale(ctx):
                    ctx.fail(case, f"{name} has NaN or inf, as it has on calls with ordinary scores (see parity): the "
                             "NaN does not come from the scores' size; find where it first appears in those calls")
                elif "long" in case.tags and _short_calls_finite(ctx):
                    ctx.fail(case, f"{name} has NaN or inf with scores of magnitude ~1e4 on this long call only (the "
                             "short ones are finite): where keys are taken a part at a time, each part's exp and what "
                             "was summed before must be rescaled to the running maximum, the largest score so far, "
                             "not the first part's (exp(m_old - m_new), as FlashAttention's online softmax does)")
                else:
                    ctx.fail(case, f"{name} has NaN or inf with scores of magnitude ~1e4: subtract the row maximum "
                             f"before exp ({'e - e.max()' if returns_arrays(ctx.problem) else 'torch.softmax does this for you'})")
        at = ctx.problem.weights_index
        if at is not None:  # masked keys get exactly 0, whatever the scores: a finite fill such as -1e4 leaks here
            mask = valid_mask(ctx.problem, case).expand(got[at].shape)
            leaked = (got[at] != 0) & ~mask
            in_rows = leaked & mask.any(-1, keepdim=True)  # beside allowed keys: the fill is not far enough below
            if in_rows.any():
                where = tuple(in_rows.nonzero()[0].tolist())
                ctx.fail(case, f"weights{list(where)} = {got[at][where].item():.6g} at a masked key, with valid scores "
                         "near -1e4: masked keys must get exactly 0 (a fill constant such as -1e4 is no longer far "
                         "below the valid scores here; fill with torch.finfo(dtype).min, or multiply the weights by "
                         "the mask)", symptom="fill_too_small")
            elif leaked.any():
                where = tuple(leaked.nonzero()[0].tolist())
                ctx.fail(case, f"weights{list(where)} = {got[at][where].item():.6g} in a row with no allowed key: such "
                         "a row must be all zeros; with every score filled alike the softmax spreads it evenly, "
                         "whatever the fill (multiply the weights by the mask, or zero those rows)")
        compare_all(ctx, case, got, expected, STABILITY)


def evidence(problem, ctx) -> list[str]:
    """The split calls' rows that have allowed keys but come back all 0: every allowed exp underflowed, so what was
    subtracted before exp was not the largest allowed score (nothing at all, or a maximum over the masked keys too)."""
    at = problem.weights_index
    for case in ctx.of("stable"):
        got = ctx.got.get(case.key)
        if "split" not in case.tags or at is None or got is None or not got.has_outputs:
            continue
        w, allowed = got.outputs[at], valid_mask(problem, case)
        if tuple(w.shape) != tuple(allowed.shape):  # weights of another shape: the shapes check says so
            continue
        lost = (w == 0).all(-1) & allowed.any(-1)
        if lost.any():
            return ["with the allowed scores near -1e4 and the masked keys' near +1e4, rows that have allowed keys come "
                    "back all 0: every allowed exp underflowed, so what was subtracted before exp was not the largest "
                    "allowed score (nothing at all, or a maximum taken over the masked keys too): mask first, then "
                    "subtract the row maximum"]
    return []


register(Check("stability", "finite and right for scores ~1e4 in float32", {"stable": group_stability}, check_stability,
               options=Amplify, names=("fill_too_small",), evidence=evidence, concepts=(("numerical stability", None),)))
