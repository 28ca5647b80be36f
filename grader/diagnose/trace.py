"""The stage finding of a failing problem: one of its wrong general calls is run again in the learner's worker with
the computation traced (run/hooks/trace.py), the reference's trace of the same call is taken here, and the two are
aligned (diagnose/align.py). What it says comes from the learner's own tensors, so it holds for code written in any
style: "your code matches the reference up to the scaled scores; no tensor of yours equals the softmax; the closest
is your aten._softmax(1) of shape (2, 7, 5), whose values differ ...".
"""
from __future__ import annotations

import math

import torch

from ..draw.describe import call_text
from ..judge.reference import reference
from ..judge.registry import general_cases
from ..run.harness import execute
from ..run.hooks import for_reference
from ..run.hooks.trace import fingerprint
from .align import Trace, align, relation, scale

LIMIT = 600
"""The most operators one traced call records (a loop over tokens may run many)."""

NOUNS = {"bmm": "batched matrix product", "mm": "matrix product", "addmm": "linear map (with bias)", "matmul": "matrix product",
         "baddbmm": "batched matrix product", "_softmax": "softmax", "_log_softmax": "log-softmax", "div": "division",
         "mul": "product", "add": "sum", "sub": "difference", "exp": "exponential", "exp2": "power of 2",
         "tanh": "tanh", "masked_fill": "masked fill", "where": "selection", "sum": "sum over an axis", "amax": "row maximum",
         "max": "maximum", "cat": "concatenation", "cos": "cosine", "sin": "sine", "pow": "power", "log": "logarithm",
         "logsumexp": "log-sum-exp", "neg": "negation", "rsqrt": "inverse square root", "sqrt": "square root",
         "reciprocal": "reciprocal", "_to_copy": "conversion", "clamp": "clamp", "maximum": "maximum", "stack": "stack",
         "_unsafe_view": "reshape", "view": "reshape", "reshape": "reshape", "clone": "copy", "permute": "permutation",
         "transpose": "transpose"}


def pick(problem, ctx):
    """The smallest general call, on the CPU and deterministic, that the learner answered and got wrong (None: none)."""
    from .diagnose import same

    if not problem.traced:
        return None

    def size(case):  # small, but not degenerate: an axis of 1 (one key, one query) hides most mistakes
        tensors = [a for a in case.call.get("args", []) if isinstance(a, torch.Tensor) and a.is_floating_point()]
        return (any(1 in a.shape[-3:] for a in tensors), sum(a.numel() for a in tensors))

    wrong = [c for c in general_cases(ctx, problem)
             if c.call.get("device", "cpu") == "cpu" and not c.call.get("train") and not c.call.get("construct")
             and not c.must_raise and c.key in ctx.ref and (g := ctx.got.get(c.key)) is not None and g.ok
             and g.has_outputs and _values_differ(c, g, ctx.ref[c.key], same)]
    return min(wrong, key=size) if wrong else None


def _values_differ(case, got, ref, same) -> bool:
    """Do the returned values differ (not only the side effects, which a trace of values cannot show)?"""
    from ..run.answer import Answer

    if not ref.has_outputs or len(got.outputs) != len(ref.outputs):
        return True
    values = lambda a: Answer.of({"ok": True, "outputs": [a.outputs]})  # noqa: E731 - the outputs alone
    return not same(case, values(got), values(ref))


def call_for(case) -> dict:
    """The case's call, traced: forward only, once, without measurements."""
    hooks = {n: o for n, o in (case.call.get("hooks") or {}).items() if n != "measure"}
    return dict(case.call, key=f"trace/{case.key}", hooks={**hooks, "trace": LIMIT}, grad_out=None, repeat=1)


def finding(problem, ctx, case, answer: dict | None) -> list[str]:
    """Lines saying where the learner's computation departs from the reference's on `case` (none: nothing to say).
    `answer`: the worker's raw result of call_for(case)."""
    if not problem.traced or not answer or not answer.get("ok") or "trace" not in answer:
        return []
    got = Trace.decode(answer["trace"])
    if got is None:
        return []
    call = call_for(case)
    ref = Trace.decode(execute(for_reference(call), reference(problem))["trace"])
    if ref is None or not ref.ops or not got.ops:  # NumPy code, or no operator at all: nothing to align
        return []
    outputs = _output_names(problem, ctx, case)
    given = [fingerprint(t) for a in call["args"] for t in (a if isinstance(a, (tuple, list)) else (a,))
             if isinstance(t, torch.Tensor) and t.is_floating_point()]
    found = align(ref, got, {i for i in range(len(ref.ops)) if tuple(ref.prints[i].tolist()) in outputs},
                  torch.stack(given) if given else None)
    if found is None:
        return _all_formed(problem, ctx, case, ref, got, outputs)
    at = found.departure
    lines = [f"Where your computation departs, traced on {call_text(problem, case)}:"]
    if found.last_matched is not None:
        lines.append(f"  it matches the reference up to {_name(ref, found.last_matched, outputs)};")
    if found.rounding:
        lines.append(f"  float32 rounding starts at {_name(ref, at, outputs)}: your tensor equals it to about "
                     f"{_gap(ref, got, at, found.closest):.0e} of its size, not to float64 precision (a float32 tensor "
                     "or constant there, in a float64 call: compute it in the inputs' dtype).")
        return lines
    if found.skipped is not None:
        p, k = found.skipped
        lines.append(f"  your code applies {got.ops[k]} to your equal of {_name(ref, p, outputs)}: the reference first "
                     f"computes {_name(ref, at, outputs)} from it, a step yours leaves out (or does another way).")
        return lines
    if found.inserted is not None:
        p, m, k = found.inserted
        lines.append(f"  your code applies {got.ops[m]} to your equal of {_name(ref, p, outputs)}, then {got.ops[k]} to "
                     f"its result: a step the reference does not take between them ({_how(ref.prints[p], got.prints[m])}).")
        return lines
    earlier = _returned_earlier(ctx, case, ref, at, outputs)
    if earlier is not None:
        lines.append(f"  what your code returns as the {outputs[tuple(ref.prints[at].tolist())]} equals "
                     f"{_name(ref, earlier, outputs)}, from which the reference goes on to {_name(ref, at, outputs)}: a "
                     "step left out before returning it.")
        return lines
    lines.append(f"  no tensor of yours equals {_name(ref, at, outputs)}")
    if found.arranged:
        lines[-1] += (", although every tensor it is computed from matches yours up to layout: the values going in are "
                      "right, their arrangement is not (a reshape without its transpose, heads split or merged in "
                      "another order, a transposed operand, or another axis)")
    if found.closest is not None:
        j = found.closest
        op = got.ops[j].split("(")[0].removeprefix("aten.")
        lines[-1] += (f"; the closest is your {got.ops[j]} (a {NOUNS.get(op, op)}) of shape {got.shape(j)}: "
                      f"{_how(ref.prints[at], got.prints[j])}.")
    else:
        lines[-1] += "; none of your tensors has as many entries (or a multiple)."
    if found.closest is not None and got.prints[found.closest, 0] != ref.prints[at, 0]:
        uses = sorted({ref.ops[i].split("(")[0].removeprefix("aten.") for i, ps in enumerate(ref.parents) if at in ps})
        lines[-1] = lines[-1].split("; the closest")[0] + (
            f"; you form no tensor with its {int(ref.prints[at, 0])} entries (the reference goes on with "
            f"{', '.join(NOUNS.get(u, u) for u in uses) or 'it as a result'}).")
    return lines


def _all_formed(problem, ctx, case, ref, got, outputs) -> list[str]:
    """Every reference stage has its equal among the learner's tensors: either the returned values are the right ones
    in the wrong places, or the learner formed the right result and went on computing (a step too many)."""
    from .align import distance

    where = f"Your computation, traced on {call_text(problem, case)}, "
    returned = ctx.got[case.key].outputs
    names = _names(case, len(returned))
    for k, (mine, theirs) in enumerate(zip(returned, ctx.ref[case.key].outputs)):
        a, b = Trace.probe(fingerprint(theirs)[None], "ref"), Trace.probe(fingerprint(mine)[None], "got")
        if mine.shape == theirs.shape and float(distance(a, b)[0, 0]) > 1e-9:  # not the same values rearranged
            row = distance(a, got)[0]
            equal = [j for j in range(len(got.ops)) if float(row[j]) <= 1e-9]
            if equal:
                earlier = _earlier_stage(ref, a, b)
                if earlier is not None:  # what it returns is a stage the reference goes on from: a step too few
                    return [where + f"forms the reference's {names[k]} (your {got.ops[equal[-1]]}), but what it "
                            f"returns as {names[k]} is an earlier stage of the reference's computation (its "
                            f"{ref.ops[earlier]}), one the reference goes on from: a step left out before returning "
                            "it (a rotation, a scaling, a normalisation or a mask not applied to what is returned)."]
                return [where + f"forms the reference's {names[k]} (your {got.ops[equal[-1]]}), but returns another "
                        f"tensor as {names[k]}, which no stage of the reference's equals: one computed further from "
                        "it, a step too many (a second scaling, a normalisation or a mask applied twice), or one "
                        "computed otherwise."]
    return [where + "forms every tensor the reference's does, with the same values up to layout, yet returns another "
            "result: the right values end up in the wrong places (a mask applied to other positions, heads or rows "
            "paired otherwise, a transposed or reshaped result)."]


def _returned_earlier(ctx, case, ref: Trace, at: int, outputs: dict) -> int | None:
    """Where the departure is a returned tensor: the last reference stage before it whose values the learner's returned
    tensor of that name has (the output projection left out: the merged heads come back); None where there is none."""
    from .align import distance

    name = outputs.get(tuple(ref.prints[at].tolist()))
    returned = ctx.got[case.key].outputs if case.key in ctx.got else []
    names = _names(case, len(returned))
    if name is None or name not in names:
        return None
    mine = Trace.probe(fingerprint(returned[names.index(name)])[None], "got")
    equal = [i for i, d in enumerate(distance(ref, mine)[:, 0].tolist()) if d <= 1e-9 and i < at]
    return equal[-1] if equal else None


def _earlier_stage(ref: Trace, theirs: Trace, mine: Trace) -> int | None:
    """The reference's stage (its index in `ref`) whose values the learner's returned tensor has, where that stage
    comes before the last one equal to the expected result; None where there is none."""
    from .align import distance

    expected = [i for i, d in enumerate(distance(ref, theirs)[:, 0].tolist()) if d <= 1e-9]
    returned = [i for i, d in enumerate(distance(ref, mine)[:, 0].tolist()) if d <= 1e-9]
    before = [i for i in returned if expected and i < expected[-1]]
    return before[-1] if before else None


def _output_names(problem, ctx, case) -> dict:
    """{fingerprint as a tuple: the returned tensor's name} for the reference's outputs of the call."""
    expected = ctx.ref[case.key].outputs
    return {tuple(fingerprint(t).tolist()): name for t, name in zip(expected, _names(case, len(expected)))}


def _names(case, n: int) -> list[str]:
    """The names of a call's n returned tensors, as its messages give them."""
    given = case.call.get("names") or ["output", "weights", "third output"]
    return [given[i] if i < len(given) else f"output {i}" for i in range(n)]


def _name(ref: Trace, i: int, outputs: dict) -> str:
    op = ref.ops[i].split("(")[0].removeprefix("aten.")
    own = outputs.get(tuple(ref.prints[i].tolist()))
    noun = f"the {own} (a {NOUNS.get(op, op)})" if own else f"the reference's {NOUNS.get(op, op)}"
    return f"{noun} {ref.ops[i]} of shape {ref.shape(i)}"


def _gap(ref, got, at, j) -> float:
    if j is None:
        return float("nan")
    a, b = ref.prints[at, 5:], got.prints[j, 5:]
    return float(((a - b).abs() / scale(ref.prints[at:at + 1])).amax())


def _how(a: torch.Tensor, b: torch.Tensor) -> str:
    """How learner record `b` differs from reference record `a` (both fingerprints), from what the numbers show."""
    if b[1] > a[1]:
        return f"NaN in {b[1]:.0%} of its entries, where the reference's has {a[1]:.0%}"
    if b[2] != a[2] or b[3] != a[3]:
        return (f"+inf in {b[2]:.0%} and -inf in {b[3]:.0%} of its entries, where the reference's has {a[2]:.0%} and "
                f"{a[3]:.0%}")
    if abs(b[4] - a[4]) > 1e-9:
        return f"exactly 0 in {b[4]:.0%} of its entries, where the reference's is in {a[4]:.0%}"
    found = relation(a, b)
    if found is not None:
        how, c = found
        return f"its values are the reference's {how} {'by ' if how == 'shifted' else ''}{c:.6g}{_known(c)}"
    qa, qb = torch.cat([a[5:9], a[10:]]), torch.cat([b[5:9], b[10:]])
    worst = float((qb - qa).abs().max())
    return (f"its values differ by up to {worst:.3g} (the reference's range is [{float(a[5]):.4g}, {float(a[6]):.4g}], "
            f"yours [{float(b[5]):.4g}, {float(b[6]):.4g}])")


def _known(c: float) -> str:
    """A constant's likely identity: a square root of a whole number, or ln 2, or their inverses."""
    for value, text in ((c, ""), (1 / c if c else 0.0, "1/")):
        if value > 0 and abs(value - math.log(2)) < 1e-9 * value:
            return f" (= {text}ln 2)"
        n = round(value * value)
        if n >= 2 and abs(value - math.sqrt(n)) < 1e-9 * value and n <= 1 << 16:
            return f" (= {text}√{n})"
    return ""
