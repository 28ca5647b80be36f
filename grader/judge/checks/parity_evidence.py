"""What the general calls (the base group, parity_float64's) show in words, where no catalogued mistake is named:
only some masking forms fail (the mask rule's words for them), float32 rounding inside a float64 computation,
weights of another shape or with the heads in another order, masked keys that receive weight."""
from __future__ import annotations

import torch

from ..compare import tolerance, usage
from ..context import valid_mask
from ...draw.conventions import WORDS
from ...masks import rule
from .parity_symptoms import EPSILON_SHRINK, _float32_rounding_only, _kinds, _ok, row_factor


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


def _factors(case) -> set:
    """What a general call is, as (name, value) pairs a message can name: its masking form, Tq against Tk, a long call,
    a decoding step, one head, the way it was called (draw/conventions.py), and each setting of its variant."""
    cfg = case.cfg
    out = {("form", case.lens), ("Tq != Tk", cfg.get("Tq") != cfg.get("Tk"))}
    kinds = {"long": "long" in case.tags, "decoding step": cfg.get("Tq") == 1 and cfg.get("Tk", 1) > 1,
             "one head": cfg.get("H") == 1, "train": bool(case.call.get("train"))}
    out |= {(name, True) for name, held in kinds.items() if held}  # what a call is, never what it is not
    out |= {("convention", t) for t in WORDS if t in case.tags}
    return out | {(k, v) for k, v in case.variant.items() if isinstance(v, (bool, int, str)) and k != "rank"}


CHANCE = 0.05
"""A factor every wrong call holds, and some right calls too, is evidence only where that many calls drawn at random
would all hold it at most this often (the hypergeometric chance: C(calls holding it, wrong) / C(calls, wrong)). One
that the wrong calls alone hold is what the results show, however few they are (one long call of 17 going wrong)."""


def _separating(ctx) -> tuple | None:
    """(factors, right calls that hold them, calls that hold them): the fewest factors (one or two) that every plain
    general call going wrong holds, and as few right ones as possible (one factor unless two leave out more right
    calls). None where no such factors leave out a right call, or where the wrong calls would all hold them by chance
    more often than CHANCE (three wrong calls among sixteen int64 ones and four int32 ones: about one time in two) while
    right calls hold them too."""
    from itertools import combinations
    from math import comb

    from .parity_symptoms import _plain, _right

    calls = [(_factors(c), _right(ctx, c)) for c in ctx.of("base") if _plain(c) and ctx.got.get(c.key) is not None]
    if not calls or all(ok for _, ok in calls) or not any(ok for _, ok in calls):
        return None
    order = {"long": 0, "convention": 0, "train": 0, "form": 1}  # named first where several factors fit as well
    seen = sorted(set().union(*(f for f, ok in calls if not ok)), key=lambda f: (order.get(f[0], 2), repr(f)))
    best, wrong = None, sum(not ok for _, ok in calls)
    for n in (1, 2):
        for pick in combinations(seen, n):
            if not all(set(pick) <= f for f, ok in calls if not ok):
                continue
            right, holding = sum(ok and set(pick) <= f for f, ok in calls), sum(set(pick) <= f for f, _ in calls)
            if right and comb(holding, wrong) > CHANCE * comb(len(calls), wrong):
                continue  # as many wrong calls drawn at random would hold it as often: no evidence
            if right < len(calls) - wrong and (best is None or right < best[1]):
                best = (list(pick), right, holding)
    return best


def _some_right(ctx, forms) -> bool:
    from .parity_symptoms import _plain, _right

    return any(_right(ctx, c) for c in ctx.of("base") if _plain(c) and c.lens in forms)


def _said(problem, pick) -> str:
    words = rule(problem).words
    parts = []
    for name, value in pick:
        if name == "form":
            parts.append(words.get(value, value))
        elif name == "convention":
            parts.append(WORDS[value])
        elif name == "long":
            parts.append("long inputs (a thousand keys or more, or dozens of queries or steps)" if value else "short inputs")
        elif name in ("decoding step", "one head", "train"):
            parts.append({"decoding step": "one query after several keys (a decoding step)", "one head": "a single head",
                          "train": "the module in train() mode (no dropout asked: the results of eval())"}[name]
                         if value else f"no {name}")
        elif name == "Tq != Tk":
            parts.append("Tq != Tk" if value else "Tq == Tk")
        else:
            parts.append(f"{name}={value!r}")
    return " and ".join(parts)


def evidence(problem, ctx) -> list[str]:
    """What the results show, in words, for the learner to start from when no mistake is named."""
    lines = []
    pick = _separating(ctx)
    bad, good = _kinds(ctx)
    words = rule(problem).words
    by_forms = bad and good and all(k in words for k in bad | good) and _controlled(ctx, bad, good)
    exact_forms = by_forms and not _some_right(ctx, bad)
    if pick is not None and (pick[1] == 0 or not exact_forms):
        # said of the parity calls alone (the plain calls of the base group, _separating): a memory or block call
        # of another check may go wrong without the factor, and "every call" would then be false
        lines.append(f"of the parity calls, those that go wrong are exactly those with {_said(problem, pick[0])}; "
                     "every other one is right" if pick[1] == 0 else f"every parity call that goes wrong has "
                     f"{_said(problem, pick[0])} ({pick[1]} of the {pick[2]} parity calls with that are right); every "
                     "other one is right")
    elif by_forms:
        some = "" if exact_forms else " (some of them)"
        lines.append(f"of the parity calls, only those with {', '.join(words[k] for k in sorted(bad))} go wrong{some}; "
                     f"those with {', '.join(words[k] for k in sorted(good))} are right")
    factor = row_factor(problem, ctx)
    if factor is not None and factor < 1 - EPSILON_SHRINK:
        lines.append(f"each wrong row is the expected row times one factor of its own, below 1 (down to {factor:.3g}): "
                     "the row's denominator is too large, by more than an epsilon would make it: it sums terms (keys, "
                     "a chunk) that the numerator does not")
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
        leaked = (w.to(torch.float64) != 0) & ~mask
        if leaked.any():
            empty = ~mask.any(-1, keepdim=True)  # rows with no allowed key
            if not (leaked & ~empty).any():  # only there: the mask is right, such rows are left to the softmax
                lines.append("masked keys receive weight only in rows with no allowed key (each such row spread over "
                             "its keys, as a softmax of equal fills gives): such a row must be all zeros; multiply the "
                             "weights by the mask, or zero those rows")
            else:
                lines.append("masked keys receive weight: the mask is not applied, or applied to the wrong positions")
            break
    return lines
