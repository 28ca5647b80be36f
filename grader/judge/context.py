"""What a check works with: its context (spec, cases, the learner's and the reference's results),
its verdict (Failed), the valid-key mask of a call, and the comparison that names the first
stage that diverges and where the weights differ."""
from __future__ import annotations

import re

import torch

from .compare import mismatch
from .registry import grader_groups, problem_hooks
from ..run.answer import Answer, Raised
from ..run.hooks import HOOKS
from ..draw.describe import call_text, error_text
from ..draw.scenarios import output_shapes, score_shape
from ..masks import rule


class Failed(Exception):
    """A check's verdict: the message is shown to the learner as is; `case` is the failing call."""

    def __init__(self, message: str, case=None, symptom: str | None = None):
        super().__init__(message)
        self.case, self.symptom = case, symptom  # symptom: a catalogued mistake id the check's own evidence shows


class GraderError(Exception):
    """The grader itself failed on this call. Before any learner code ran (its worker never started) the check is a
    grader error, left out of the maximum; once the learner's code has run, a check that cannot be judged counts as
    failed (grading.py: the learner's results could be what made the grader fail)."""


FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""The only dtypes a returned tensor (an output, a gradient) may have: the problems' float dtypes. No spec declares
an integer or boolean output (every Out role is values, weights, cache, lse or gradient)."""




def decode(problem, cases, results: dict) -> dict:
    """The worker's results as the judges may read them: each output and gradient a dense CPU (or CUDA) tensor of a
    dtype in FLOAT_DTYPES, as many runs and outputs as the call gives. A result that breaks this becomes the
    learner's failure of that call ({"ok": False, "rejected": why}), worded by the grader (dtype and layout names
    as torch prints them, never the learner's text). Whatever the worker claims is checked here, on the grader's
    side: the worker is the learner's process, and its own checks (run/harness.py) can be bypassed. Each result
    comes out typed (run/answer.Answer); an Answer given again is returned as it is."""
    numpy = returns_arrays(problem)  # once per decode, not once per result
    return {key: _decode(problem, cases.get(key), res, numpy) for key, res in results.items()}


def references(ref: dict) -> dict:
    """The reference's results (expected values, computed by the grader) as typed answers."""
    return {key: Answer.of({"ok": True, **res}) if isinstance(res, dict) else res for key, res in ref.items()}


def _decode(problem, case, res, numpy: bool):
    if not isinstance(res, dict) or res.get("ok") is not True or case is None:
        return Answer.of(res) if isinstance(res, (dict, Answer)) else None
    why = _refused(problem, case, res, numpy)
    if why is None:
        return Answer.of(res)
    if case.must_raise:  # judged by outcome alone: it was accepted, whatever came back
        return Answer(ok=True)
    return Answer(ok=False, rejected=why, error=Raised("RejectedOutput", why, why))


def _refused(problem, case, res, numpy: bool) -> str | None:
    """Why the result cannot be judged as it is (the learner's doing), or None."""
    call = case.call
    want = call.get("dtype") if call.get("dtype") in _NAMES else None
    runs = res.get("outputs")
    if runs is None:
        return None if call.get("construct") or case.group in grader_groups() else "nothing came back"
    names = call.get("names") or problem.outputs  # a call of another function names its own outputs
    n_out, repeat = call.get("n_out", len(names)), call.get("repeat", 1)
    if not isinstance(runs, list) or len(runs) != repeat or not all(isinstance(r, list) for r in runs) \
            or not isinstance(res.get("devices", []), list):
        return "the outputs came back in a form the grader cannot read"
    for run in runs:
        if len(run) != n_out:
            return f"{len(run)} outputs came back, expected {n_out} ({', '.join(names)})"
        for name, t in zip(names, run):
            why = _not_float(t, want, numpy)
            if why:
                return f"returned {name} as {why}"
    earlier = res.get("earlier")  # an inference call's earlier run, as returned and at the end: read as the outputs are
    if earlier is not None:
        if not call.get("warm") or not isinstance(earlier, list) or len(earlier) != 2 \
                or not all(isinstance(r, list) and len(r) == n_out for r in earlier):
            return "the earlier call's outputs came back in a form the grader cannot read"
        for name, t in ((n, t) for r in earlier for n, t in zip(names, r)):
            why = _not_float(t, want, numpy)
            if why:
                return f"returned {name} from the earlier call as {why}"
    grads = res.get("grads")
    if call.get("grad_out") is not None and not isinstance(grads, dict):
        return "no gradients came back"
    for key, g in (grads or {}).items():
        why = None if g is None else _not_float(g, want, False)
        if why:
            return f"the gradient of {grad_name(problem, key)} came back as {why}"
    return None


_NAMES = {str(d).removeprefix("torch.") for d in FLOAT_DTYPES}


def _not_float(t, want: str | None, numpy: bool) -> str | None:
    """What is wrong with a returned value that must be a dense tensor of a float dtype (None: nothing). Names are
    the grader's: torch's (NumPy's, which are the same without "torch.", for an array)."""
    noun = "array" if numpy else "tensor"
    expected = f"a {want} {noun}" if want else f"a floating-point {noun} ({', '.join(sorted(_NAMES))})"
    if not isinstance(t, torch.Tensor) or type(t) not in (torch.Tensor, torch.nn.Parameter):
        return f"a {type(t).__name__} where {expected} was expected"
    if t.is_nested:
        return f"a nested tensor where {expected} was expected"
    if t.layout != torch.strided or t.is_quantized:
        return f"a {t.layout} tensor of dtype {t.dtype} where {expected} (dense) was expected"
    if t.device.type not in ("cpu", "cuda"):
        return f"a tensor on the {t.device.type} device where {expected} was expected"
    if t.dtype not in FLOAT_DTYPES:
        dtype = str(t.dtype).removeprefix("torch.") if numpy else str(t.dtype)
        return f"a{'n' if numpy else ''} {noun} of dtype {dtype} where {expected} was expected"
    return None


def grad_name(problem, key) -> str:
    """An input's name from the spec, or a parameter's name where it is a plain dotted name."""
    key = str(key)
    found = re.fullmatch(r"input:(\d{1,3})(?:\.(\d{1,3}))?", key)
    if found and int(found.group(1)) < len(problem.arg_names):
        name = problem.arg_names[int(found.group(1))]
        return name if found.group(2) is None else f"{name}[{int(found.group(2))}]"
    name = key.removeprefix("param:")
    return name if key.startswith("param:") and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]{0,99}", name) else "a parameter"


def returns_arrays(problem) -> bool:
    """The problem's calls return something other than tensors (NumPy arrays): a worker hook converts them."""
    return any(HOOKS[name].noun for name in problem_hooks(problem))


class Context:
    """What a judge sees: the spec, its cases, the learner's results and the reference's."""

    def __init__(self, problem, cases, got, ref, failure=None, seed=None, failing_deps=(), fault=False, memo=None):
        self.problem, self.cases, self.ref, self.failure = problem, cases, references(ref), failure
        self.got = decode(problem, cases, got)  # what the learner returned, allowed dtypes only: the judges read this
        self.fault = fault  # the failure is the grader's (its worker never started), never the learner's
        self.seed = seed
        self.failing_deps = failing_deps  # imported problems that fail their own checks: their mistakes may explain ours
        self.memo = {} if memo is None else memo  # what diagnosis may reuse across runs (judge/expected.References)
        self.scratch: dict = {}  # what this judging run computes once for several of its users (diagnose/)
        from .registry import loaded

        checks = loaded()  # the problem's checks that vouch for every result read (registry.Check.vouch), found once
        self.vouchers = [checks[c].vouch for c in problem.points if c in checks and checks[c].vouch is not None]

    def of(self, group: str):
        return [c for c in self.cases.values() if c.group == group]

    def result(self, case) -> Answer:
        res = self.got.get(case.key)
        if res is None and self.fault:
            raise GraderError(f"the grader could not run {call_text(self.problem, case)}: {self.failure}")
        if res is None:
            raise Failed(f"called {call_text(self.problem, case)}\nno result: {self.failure or 'the worker gave none'}")
        if res.rejected:
            raise Failed(f"called {call_text(self.problem, case)}\n{res.rejected}", case)
        if res.grader_error:
            raise GraderError(f"the grader failed while running {call_text(self.problem, case)}: {error_text(res)}")
        if not res.ok:
            raise Failed(f"called {call_text(self.problem, case)}\nit raised {error_text(res)}")
        return res

    def raw_outputs(self, case, run: int = 0) -> list:
        """What came back, unchecked (the shapes check reads this)."""
        return self.result(case).runs[run]

    def outputs(self, case, run: int = 0) -> list:
        """What came back, each output of the shape the contract gives (else the check fails, saying so), where every
        check of the problem that vouches for results does (registry.Check.vouch)."""
        for vouch in self.vouchers:
            vouch(self, case)
        got = self.raw_outputs(case, run)
        expected = self.ref[case.key].runs[run] if case.key in self.ref else None
        shapes = [tuple(e.shape) for e in expected] if expected else output_shapes(self.problem, case.cfg)
        for name, g, shape in zip(case.call.get("names") or self.problem.outputs, got, shapes):
            if tuple(g.shape) != shape:
                self.fail(case, f"{name} has shape {tuple(g.shape)}, expected {shape}")
        return got

    def expected(self, case, run: int = 0) -> list:
        return self.ref[case.key].runs[run]

    def fail(self, case, text: str, symptom: str | None = None):
        raise Failed(f"called {call_text(self.problem, case)}\n{text}", case, symptom)


def valid_mask(problem, case) -> torch.Tensor:
    """Boolean, of the score matrix's shape (..., Tq, Tk): which key each query may attend in this call (the
    problem's mask rule reads its masking argument, or the argument's default where the call leaves it out)."""
    shape = score_shape(problem, case.cfg)
    args, at = case.call["args"], problem.mask_index
    arg = None if at is None else args[at] if at < len(args) else problem.call_defaults.get(problem.arg_names[at])
    return rule(problem).allowed(problem, case.cfg, arg, case.call).expand(shape)


STAGE_HINTS = (  # (first stage: the weights; then the other outputs)
    "The weights already differ: look at the scores, the mask and the softmax first.",
    "The weights match but the output does not: look at what the weights multiply and what follows.",
)


def _stage_hint(weights, expected) -> str:
    """Where the weights passed their tolerance: whether they also agree at float64 rounding (then the output's
    stage is the first to depart), or only within the tolerance (then the departure may start in them)."""
    g, e = weights.to(torch.float64), expected.to(torch.float64)
    if g.shape == e.shape and torch.isfinite(g).all():
        diff = (g - e).abs().max().item() if g.numel() else 0.0
        if diff > 1e-12 * max(1.0, e.abs().max().item()):
            return (f"The weights are within the tolerance but not exact (they differ by up to {diff:.3g}), and the "
                    "output is not: the departure may start in the weights (the scores, the scale, a float32 step) "
                    "and grow in what they multiply.")
    return STAGE_HINTS[1]


def compare_all(ctx, case, got, expected, tol):
    """Fail on the first stage that diverges: the weights (scores, mask, softmax), where the problem returns
    them, before the other outputs, in order."""
    names, w = ctx.problem.outputs, ctx.problem.weights_index
    order = ([w] if w is not None else []) + [i for i in range(len(names)) if i != w]
    for i in order:
        bad = mismatch(names[i], got[i], expected[i], tol)
        if bad:
            shape = error_shape(ctx.problem, case, got[i], expected[i], tol) if i == w else ""
            hint = f"\n{_stage_hint(got[w], expected[w]) if i != w else STAGE_HINTS[0]}" \
                if w is not None and len(names) > 1 else ""
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
        return "\nOnly rows with no allowed key differ: such a row must be all zeros (not NaN, not uniform)."
    return ""
