"""Visible quick checks on one small fixed example per problem: shapes and weight sums.

Learners see these (notebooks, candidate bundles); they catch gross errors fast and reveal
nothing of the hidden checks' inputs. The checking code is grader/judge/public_checks.py.
"""
from __future__ import annotations

from ..judge.public_checks import call_fixed, fixed_example_problems
import torch

from ..draw.scenarios import output_shapes
from ..judge.context import returns_arrays
from ..masks import rule

FIXED = {"B": 2, "Tq": 3, "Tk": 4, "dq": 5, "dk": 6, "dv": 3, "h": 7, "H": 2}


def cases(problem) -> list[dict]:
    """One fixed example per variant: plain data (module, symbol, ctor, input shapes, mask, trailing args)."""
    from ..judge.registry import loaded

    checks, out = loaded(), []
    for variant in problem.variants:
        cfg = problem.fit(dict(FIXED), variant)
        ctor = problem.ctor_call(cfg, variant) if problem.is_module else None
        mask = rule(problem).example(problem, cfg)
        inputs = problem.inputs(cfg, torch.Generator().manual_seed(0))
        out.append({
            "id": problem.id + "".join(f"-{v}" for v in variant.values()),
            "module": problem.id, "symbol": problem.symbol,
            "ctor": None if ctor is None else (ctor["args"], ctor["kwargs"]),
            "inputs": [_shape(t) for t in inputs],
            "weights_at": problem.weights_index,
            "row_sums": any(checks[c].rows_sum_to_one for c in problem.points),  # as the hidden checks (not local-p)
            "outputs": output_shapes(problem, cfg),
            "mask": mask, "trailing": list(problem.trailing(cfg)), "numpy": returns_arrays(problem),
            "keep": _keep(problem, cfg, mask, {"args": inputs + [mask]}),
        })
    return out


def _keep(problem, cfg, mask, call):
    """The allowed keys laid out against the weights, where the mask rule lays a mask out in a way the mask's own
    shape does not say (a (B, Tk) key padding mask): nested lists, else None (the public check derives them)."""
    r = rule(problem)
    if mask is None or problem.weights_index is None or isinstance(mask, (bool, int, float)) \
            or not (r.laid_out or r.flagged):
        return None
    shape = output_shapes(problem, cfg)[problem.weights_index]
    return r.allowed(problem, cfg, torch.tensor(mask), call).expand(shape).tolist()


def _shape(t):
    """How the fixed example describes one input (judge/public_checks.py's _input reads it)."""
    if t is None:
        return {"none": True}
    if isinstance(t, tuple):
        return {"tuple": [tuple(x.shape) for x in t]}
    if isinstance(t, (bool, int, float)):  # a setting (ALiBi's is_causal)
        return {"scalar": t}
    return tuple(t.shape) if t.is_floating_point() else {"values": t.tolist()}


def quick_checks(problem, target) -> list[tuple[str, str | None]]:
    """(what was checked, None if it held or why not) for each variant of the problem."""
    results = []
    for case in cases(problem):
        what = f"shapes and weight sums on the fixed example ({case['id']})"
        try:
            found = fixed_example_problems(target, case["ctor"], case["inputs"], case["outputs"], case["mask"],
                                           case["trailing"], case["numpy"], case["weights_at"], case["row_sums"],
                                           case.get("keep"))
        except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything
            found = [f"{type(exc).__name__}: {exc}"]
        results.append((what, "; ".join(found) or None))
    return results


def run(problem, target, variant: dict) -> list:
    """The outputs of `target` (the learner's or the reference) on the fixed example of `variant`."""
    case = cases(problem)[problem.variants.index(variant)]
    return call_fixed(target, case["ctor"], case["inputs"], case["mask"], case["trailing"], case["numpy"])
