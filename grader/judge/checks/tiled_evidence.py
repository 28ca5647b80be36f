"""What the general calls show of tiled and backward code, in words, where no catalogued mistake is named: lse off by
a factor of ln 2, rows that have allowed keys coming back exactly 0, errors only when block_q != block_k or only with a
partial last block, errors only on rows whose maximum score lies in a later key block (the running max rises: the
rescale), only one returned tensor wrong (one of dQ, dK, dV; lse alone). Each reads the calls' own results; none
names a mistake."""
from __future__ import annotations

import math

import torch

from ..compare import tolerance
from ..context import valid_mask


def _role(problem, role: str) -> list[int]:
    return [i for i, o in enumerate(problem.methods[-1].returns) if o.role == role]


def _pairs(ctx):
    """(case, learner outputs, reference outputs) of the base calls both answered, shapes alike, in float64."""
    for case in ctx.of("base"):
        got, ref = ctx.got.get(case.key), ctx.ref.get(case.key)
        if got is None or ref is None or not got.has_outputs or len(got.outputs) != len(ref.outputs):
            continue
        if any(g.shape != r.shape for g, r in zip(got.outputs, ref.outputs)):
            continue
        yield case, [g.to(torch.float64) for g in got.outputs], [r.to(torch.float64) for r in ref.outputs]


def _close(x, y, grad=False) -> torch.Tensor:
    """Entry-wise agreement at float64's tolerance (NaN and inf must sit in the same places)."""
    tol = tolerance("float64", grad)
    scale = max(1.0, float(y[torch.isfinite(y)].abs().max()) if torch.isfinite(y).any() else 1.0)
    near = (x - y).abs() <= tol.atol * scale + tol.rtol * y.abs()
    return near | (x == y) | (torch.isnan(x) & torch.isnan(y))


def _lse_base(problem, ctx) -> list[str]:
    at = _role(problem, "lse")
    ratios = set()
    for case, got, ref in _pairs(ctx) if at else ():
        g, r = got[at[0]], ref[at[0]]
        use = torch.isfinite(r) & (r.abs() > 1e-3) & torch.isfinite(g)
        if not use.any() or _close(g, r).all():
            continue
        for ratio, words in ((1 / math.log(2), "divided by ln 2 (a base-2 log: log2 of the sum, or the max kept in "
                                              "log2 units for exp2, never converted back)"),
                             (math.log(2), "times ln 2 (a natural log taken of a base-2 quantity)")):
            if torch.allclose(g[use], r[use] * ratio, rtol=1e-6, atol=0):
                ratios.add(words)
                break
        else:
            return []
    return [f"your lse is the reference's {ratios.pop()}"] if len(ratios) == 1 else []


def _zero_rows(problem, ctx) -> list[str]:
    at = _role(problem, "values")
    for case, got, ref in _pairs(ctx) if at and _role(problem, "lse") else ():
        g, r = got[at[0]], ref[at[0]]
        allowed = valid_mask(problem, case).expand(*r.shape[:-1], -1).any(dim=-1)
        lost = (g == 0).all(dim=-1) & allowed & (r != 0).any(dim=-1)
        if lost.any():
            where = [int(i) for i in torch.nonzero(lost)[0]]
            return [f"rows that have allowed keys come back exactly 0 (row {where} of a call with "
                    f"{case.call['args'][0].shape[-2]} queries): no key block was ever added to them"]
    return []


def _blocks_unequal(problem, ctx) -> list[str]:
    names = problem.arg_names
    if "block_q" not in names or "block_k" not in names:
        return []
    iq, ik = names.index("block_q"), names.index("block_k")
    right, wrong, partial = set(), set(), False
    for case, got, ref in _pairs(ctx):
        args = case.call["args"]
        if len(args) <= max(iq, ik):
            continue
        equal = args[iq] == args[ik]
        ok = all(_close(g, r).all() for g, r in zip(got, ref))
        (right if ok else wrong).add(equal)
        partial |= ok and equal and bool(args[0].shape[-2] % args[iq]) and bool(args[1].shape[-2] % args[ik])
    if wrong == {False} and partial:  # equal blocks are right with partial blocks on both axes too
        return ["of the calls that set both block sizes, only those with block_q != block_k go wrong: one block size "
                "is used for the other axis somewhere (a loop bound, a slice, a mask's offset)"]
    return []


def _partial_blocks(problem, ctx) -> list[str]:
    """Only calls whose last key (or query) block is partial go wrong."""
    names = problem.arg_names
    lines = []
    for arg, at, axis in (("block_k", 1, "key"), ("block_q", 0, "query")):
        if lines:  # the key blocks explain what goes wrong: the query blocks' coincidence is no finding
            break
        if arg not in names:
            continue
        i = names.index(arg)
        right, wrong = [], []
        for case, got, ref in _pairs(ctx):
            args = case.call["args"]
            block = args[i] if len(args) > i else problem.call_defaults.get(arg, 64)
            T = args[at].shape[-2]
            partial = T > block and bool(T % block)  # a last block shorter than the others (one block is no tiling)
            (right if all(_close(g, r).all() for g, r in zip(got, ref)) else wrong).append(partial)
        # every wrong call has a partial block, some full-block call is right, and most partial calls are wrong
        if wrong and all(wrong) and False in right and len(wrong) > right.count(True):
            T = "Tk" if axis == "key" else "Tq"
            lines.append(f"only calls whose last {axis} block is partial ({arg} does not divide {T}) go wrong: the "
                         f"last, shorter {axis} block is dropped or mishandled")
    return lines


def _max_rises(problem, ctx) -> list[str]:
    names, at = problem.arg_names, _role(problem, "values")
    if "block_k" not in names or not at:
        return []
    ik = names.index("block_k")
    rising_wrong = steady_wrong = rising = steady = 0
    for case, got, ref in _pairs(ctx):
        args = case.call["args"]
        block = args[ik] if len(args) > ik else problem.call_defaults.get("block_k", 64)
        q, k = args[0].to(torch.float64), args[1].to(torch.float64)
        s = (q @ k.transpose(-1, -2)).masked_fill(~valid_mask(problem, case).expand(*q.shape[:-1], k.shape[-2]), -math.inf)
        if s.shape[-1] <= block:
            continue
        first = s[..., :block].amax(dim=-1)
        later = s[..., block:].amax(dim=-1) > first
        bad = ~_close(got[at[0]], ref[at[0]]).all(dim=-1)
        rising, steady = rising + int(later.sum()), steady + int((~later).sum())
        rising_wrong += int((bad & later).sum())
        steady_wrong += int((bad & ~later).sum())
    if rising_wrong and not steady_wrong and steady:
        return ["only rows whose highest score lies in a later key block than the first are wrong: when the running "
                "max rises, the accumulator and the running sum must be rescaled by exp(m_old - m_new)"]
    return []


def _one_output(problem, ctx) -> list[str]:
    """Only one of the returned tensors is wrong (dK alone of the gradients; lse alone, the output right)."""
    outs = problem.methods[-1].returns
    if len(outs) < 2 or problem.weights_index is not None:
        return []
    wrong = set()
    for case, got, ref in _pairs(ctx):
        wrong |= {i for i, o in enumerate(outs) if not _close(got[i], ref[i], grad=o.role == "gradient").all()}
    if len(wrong) == 1:
        i = wrong.pop()
        others = [o.name for j, o in enumerate(outs) if j != i]
        return [f"only {outs[i].name} is wrong ({', '.join(others)} {'is' if len(others) == 1 else 'are'} right): the "
                "steps it shares with them are right; look at the ones that compute it alone"]
    return []


def evidence(problem, ctx) -> list[str]:
    """Each detector's line, in order."""
    return [line for f in (_lse_base, _zero_rows, _blocks_unequal, _partial_blocks, _max_rises, _one_output) for line in f(problem, ctx)]
