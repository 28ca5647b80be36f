"""What a check works with: its context (spec, cases, the learner's and the reference's results),
its verdict (Failed), the valid-key mask of a call, and the comparison that names the first
stage that diverges and where the weights differ."""
from __future__ import annotations

import torch

from .compare import mismatch
from ..draw.describe import call_text, error_text
from ..draw.scenarios import causal_mask, lens_to_mask, output_shapes, score_shape


class Failed(Exception):
    """A check's verdict: the message is shown to the learner as is; `case` is the failing call."""

    def __init__(self, message: str, case=None, symptom: str | None = None):
        super().__init__(message)
        self.case, self.symptom = case, symptom  # symptom: a catalogued mistake id the check's own evidence shows


class GraderError(Exception):
    """The grader itself failed on this call (not the learner's code): the check is left out of the maximum."""


class Context:
    """What a judge sees: the spec, its cases, the learner's results and the reference's."""

    def __init__(self, problem, cases, got, ref, failure=None, seed=None, failing_deps=(), fault=False):
        self.problem, self.cases, self.got, self.ref, self.failure = problem, cases, got, ref, failure
        self.fault = fault  # the failure is the grader's (its worker never started), never the learner's
        self.seed = seed
        self.failing_deps = failing_deps  # imported problems that fail their own checks: their mistakes may explain ours

    def of(self, group: str):
        return [c for c in self.cases.values() if c.group == group]

    def result(self, case) -> dict:
        res = self.got.get(case.key)
        if res is None and self.fault:
            raise GraderError(f"the grader could not run {call_text(self.problem, case)}: {self.failure}")
        if res is None:
            raise Failed(f"called {call_text(self.problem, case)}\nno result: {self.failure or 'the worker gave none'}")
        if res.get("grader_error"):
            raise GraderError(f"the grader failed while running {call_text(self.problem, case)}: {error_text(res)}")
        if not res["ok"]:
            raise Failed(f"called {call_text(self.problem, case)}\nit raised {error_text(res)}")
        return res

    def raw_outputs(self, case, run: int = 0) -> list:
        """What came back, unchecked (the shapes check reads this)."""
        return self.result(case)["outputs"][run]

    def outputs(self, case, run: int = 0) -> list:
        """What came back, each output of the shape the contract gives (else the check fails, saying so)."""
        got = self.raw_outputs(case, run)
        expected = self.ref[case.key]["outputs"][run] if case.key in self.ref else None
        shapes = [tuple(e.shape) for e in expected] if expected else output_shapes(self.problem, case.cfg)
        for name, g, shape in zip(self.problem.outputs, got, shapes):
            if tuple(g.shape) != shape:
                self.fail(case, f"{name} has shape {tuple(g.shape)}, expected {shape}")
        return got

    def expected(self, case, run: int = 0) -> list:
        return self.ref[case.key]["outputs"][run]

    def fail(self, case, text: str, symptom: str | None = None):
        raise Failed(f"called {call_text(self.problem, case)}\n{text}", case, symptom)


def valid_mask(problem, case) -> torch.Tensor:
    """Boolean, of the score matrix's shape (..., Tq, Tk): which key each query may attend in this call."""
    shape = score_shape(problem, case.cfg)
    args, at = case.call["args"], problem.mask_index
    arg = None if at is None else args[at] if at < len(args) else problem.call_defaults.get(problem.arg_names[at])
    if arg is None or arg is False:
        return torch.ones(shape, dtype=torch.bool)
    if problem.mask_role == "causal":
        return causal_mask(shape[-2], shape[-1]).expand(shape)
    return (arg if problem.mask_role == "mask" else lens_to_mask(problem, case.cfg, arg)).expand(shape)


STAGE_HINTS = (  # (first stage: the weights; then the other outputs)
    "The weights already differ: look at the scores, the mask and the softmax first.",
    "The weights match but the output does not: look at what the weights multiply and what follows.",
)


def compare_all(ctx, case, got, expected, tol):
    """Fail on the first stage that diverges: the weights (scores, mask, softmax), where the problem returns
    them, before the other outputs, in order."""
    names, w = ctx.problem.outputs, ctx.problem.weights_index
    order = ([w] if w is not None else []) + [i for i in range(len(names)) if i != w]
    for i in order:
        bad = mismatch(names[i], got[i], expected[i], tol)
        if bad:
            shape = error_shape(ctx.problem, case, got[i], expected[i], tol) if i == w else ""
            hint = f"\n{STAGE_HINTS[i != w]}" if w is not None and len(names) > 1 else ""
            ctx.fail(case, bad + hint + shape)


def error_shape(problem, case, got, expected, tol) -> str:
    """Where the weights differ, when that alone tells something: only masked keys, only empty rows."""
    if got.shape != expected.shape:
        return ""
    g, e = got.to(torch.float64), expected.to(torch.float64)
    bad = ~((g - e).abs() <= tol.atol * max(1.0, e.abs().max().item()) + tol.rtol * e.abs())
    mask = valid_mask(problem, case).expand(e.shape)
    empty = ~mask.any(-1, keepdim=True).expand(e.shape)
    if bad.any() and not (bad & mask).any() and (bad & ~empty).any():
        return "\nOnly masked keys differ, and valid keys are right: masked positions must get weight exactly 0."
    if bad.any() and not (bad & ~empty).any():
        return "\nOnly rows with valid_len 0 differ: such a row must be all zeros (not NaN, not uniform)."
    return ""
