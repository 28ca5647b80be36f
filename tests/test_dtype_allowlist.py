"""A submission cannot shrink its own maximum with odd results: an output of a dtype outside the problems' float
dtypes (float8, complex, bits, unsigned, bool, integer) or of another layout (sparse, nested) fails the checks that
read it, with a message naming the dtype as the grader writes it; no check becomes a grader error, and the maximum
stays the problem's full one. Checked twice: as the worker reports it (run/harness.py refuses the output), and with
the worker's own check switched off by the submission (the worker is the learner's process), where only the
grader's decode (judge/context.py) stands between the result and the judges. Last, a worker that claims the grader
failed around every call (a forged GraderFault) fails those checks instead of leaving them out."""
from __future__ import annotations

import pytest
import torch

from conftest import SOLUTIONS, make_impl, grade_shared
from attnkit.grading import _name_mistakes, _run_check
from attnkit.judge.checks import CHECKS
from attnkit.judge.context import Context
from attnkit.judge.expected import expected
from attnkit.judge.plan import Plan
from attnkit.judge.reference import reference
from attnkit.problems import get
from attnkit.run.harness import execute

PROBLEMS = ["masked_softmax", "scaled_dot_product_attention", "multihead_attention", "flash_attention",
            "attention_backward"]  # independent of each other: one submission holds an odd one of each

# how a submission turns a good output `t` into an odd one, by the name its message must show
DTYPES = {name: f"t.to(torch.{name})" for name in ("float8_e4m3fn", "float8_e5m2", "complex64", "uint8", "uint16",
                                                     "uint32", "uint64", "bool", "int64", "int32")
          if isinstance(getattr(torch, name, None), torch.dtype)}
DTYPES["bits8"] = "torch.empty(t.shape, dtype=torch.bits8)"
LAYOUTS = {"sparse_coo": "t.to_sparse()", "nested": "torch.nested.nested_tensor([t])"}
KINDS = {**DTYPES, **LAYOUTS}

# (kind, path): "grader" switches the worker's own check off, so only the grader's decode judges; "worker" leaves it
SLOTS = [(k, "grader") for k in DTYPES] + [(k, "worker") for k in ("float8_e5m2", "complex64", "bits8", "uint16",
                                                                   "bool", "int64", *LAYOUTS)]
ROUNDS = [SLOTS[i:i + len(PROBLEMS)] for i in range(0, len(SLOTS), len(PROBLEMS))]
CASES = [pytest.param(r, pid, *slot, id=f"{slot[0]}-{slot[1]}-{pid}",
                      marks=[pytest.mark.slow] if 0 < r < len(ROUNDS) - 1 else [])
         for r, slots in enumerate(ROUNDS) for pid, slot in zip(PROBLEMS, slots)]
"""Each round is one grading of all five problems: the README's command grades the first (odd dtypes through the
grader's decode alone) and the last (odd dtypes and layouts refused by the worker), the slow suite the others."""

BYPASS = '''
import attnkit.run.harness as _harness  # the worker's own copy: the learner's process holds it


def _loose(value, n_out, convert=None, options=None, structure=None, names=None):  # the worker's output check, switched off
    if structure:
        return list(_harness._flatten(value, structure, names or ["output"] * n_out))
    return list(value) if n_out > 1 else [value]


_harness._outputs = _loose
'''

ODD = '''

def _odd(t):
    t = t.detach()
    return {expr}


def _convert(out, at):
    if isinstance(out, tuple):
        return tuple(_odd(o) if i == at else o for i, o in enumerate(out))
    return _odd(out)
'''
FUNCTION = '''
_plain = {symbol}


def {symbol}(*args, **kwargs):
    return _convert(_plain(*args, **kwargs), {at})
'''
MODULE = '''
_Plain = {symbol}


class {symbol}(_Plain):
    def forward(self, *args, **kwargs):
        return _convert(super().forward(*args, **kwargs), {at})
'''


def odd_source(pid: str, expr: str, at: int, bypass: bool) -> str:
    """The reference solution, with its output `at` turned odd by `expr` (of `t`) on the way out."""
    problem = get(pid)
    wrap = MODULE if problem.is_module else FUNCTION
    return ((SOLUTIONS / f"{pid}.py").read_text() + "\nimport torch\n" + (BYPASS if bypass else "")
            + ODD.format(expr=expr) + wrap.format(symbol=problem.symbol, at=at))


def full_maximum(pid: str, report) -> float:
    return sum(pts for cid, pts in get(pid).points.items() if report.devices["cuda"] or not CHECKS[cid].needs_cuda)


@pytest.fixture(scope="module")
def rounds(tmp_path_factory):
    """Each round's report, graded on first use: one submission, each problem returning its own odd kind."""
    done = {}

    def report(r):
        if r not in done:
            files = {f"{pid}.py": odd_source(pid, KINDS[kind], r % len(get(pid).outputs), path == "grader")
                     for pid, (kind, path) in zip(PROBLEMS, ROUNDS[r])}
            impl = make_impl(tmp_path_factory.mktemp(f"round{r}"), files)
            done[r] = grade_shared(impl, PROBLEMS[:len(ROUNDS[r])], sandbox=False)
        return done[r]

    return report


@pytest.mark.parametrize("r,pid,kind,path", CASES)
def test_an_odd_output_fails_its_checks_and_keeps_the_maximum(rounds, r, pid, kind, path):
    report = rounds(r)
    result = report.problem(pid)
    assert [c.id for c in result.checks if c.status == "error"] == [], [c.message[:300] for c in result.checks]
    assert result.max_score == full_maximum(pid, report)
    assert result.score < result.max_score and result.status == "failed"
    failed = [c for c in result.checks if c.status == "failed"]
    name = str(getattr(torch, kind)) if kind in DTYPES else kind
    assert any(name in c.message for c in failed), [c.message[:300] for c in failed]
    if path == "grader":  # the grader's own words: what came back, and what the call asked for
        assert any(f"a tensor of dtype {name} where a float" in c.message and "CallError" not in c.message
                   for c in failed), [c.message[:300] for c in failed]
    assert not any("diagnosis failed" in c.message or "Traceback" in c.message for c in failed)
    assert not any("failed internally" in line or "could not be read" in line for line in result.unexplained)


FORGED = '''
import attnkit.run.harness as _harness  # the worker's own copy: the learner's process holds it


def _execute(call, target, **options):
    raise _harness.GraderFault("reading the outputs: forged")


_harness.execute = _execute
'''


def test_a_forged_grader_fault_fails_the_checks_instead_of_leaving_them_out(tmp_path):
    """The worker reports the grader's own faults around a call (harness.GraderFault); the worker being the learner's
    process, such a report comes after the learner's code ran, and fails the check, saying the grader could not
    judge it, instead of leaving its points out of the maximum."""
    pid = "scaled_dot_product_attention"
    impl = make_impl(tmp_path, {f"{pid}.py": (SOLUTIONS / f"{pid}.py").read_text() + FORGED})
    report = grade_shared(impl, [pid], sandbox=False)
    result = report.problem(pid)
    assert report.grader_errors == 0 and result.max_score == full_maximum(pid, report)
    assert result.score < result.max_score
    unjudged = [c for c in result.checks if "could not judge" in c.message]
    assert unjudged and all(c.status == "failed" and c.score == 0 and c.max_score > 0 for c in unjudged)
    assert any("forged" in c.message for c in unjudged)


# The grader's decode alone, on results no worker could send over the wire (sparse, nested, meta, quantized,
# subclasses, a wrong count), fed straight to every check and to the mistake diagnosis.
def _quantized(t):
    return torch.quantize_per_tensor(t.float(), 0.1, 0, torch.qint8)


class Sub(torch.Tensor):
    pass


DIRECT = {
    "sparse": (lambda t: t.to_sparse(), "sparse_coo"),
    "nested": (lambda t: torch.nested.nested_tensor([t]), "nested"),
    "meta": (lambda t: torch.empty(t.shape, device="meta"), "meta"),
    "quantized": (_quantized, "qint8"),
    "subclass": (lambda t: t.as_subclass(Sub), "Sub"),
    "list": (lambda t: t.tolist(), "list"),
    "bits8": (lambda t: torch.empty(t.shape, dtype=torch.bits8), "torch.bits8"),
    "float8": (lambda t: t.to(torch.float8_e5m2), "torch.float8_e5m2"),
}


@pytest.fixture(scope="module")
def answers():
    """masked_softmax's calls answered by the reference, in process: the results a worker would send."""
    problem = get("masked_softmax")
    plan = Plan.draw([problem], 0)
    cases, refs = plan.cases(problem), expected(plan, problem)
    got = {k: {"ok": True, **execute(c.call, reference(problem))} for k, c in cases.items() if c.group != "imports"}
    return problem, cases, refs, got


@pytest.mark.parametrize("kind", sorted(DIRECT))
def test_the_grader_decodes_every_result_before_any_check_reads_it(answers, kind):
    problem, cases, refs, got = answers
    make, name = DIRECT[kind]
    odd = {}
    for key, res in got.items():
        res = dict(res)
        if "outputs" in res:
            res["outputs"] = [[make(o) for o in run] for run in res["outputs"]]
        if res.get("grads"):
            res["grads"] = {k: None if g is None else make(g) for k, g in res["grads"].items()}
        odd[key] = res
    ctx = Context(problem, cases, odd, refs, seed=0)
    checks = [_run_check(CHECKS[cid], ctx, pts, True) for cid, pts in problem.points.items()
              if not CHECKS[cid].needs_cuda]
    assert all(c.status == "failed" for c in checks), [(c.id, c.status, c.message[:200]) for c in checks]
    assert all("could not judge" not in c.message for c in checks), [c.message[:300] for c in checks]
    assert any(name in c.message for c in checks), [c.message[:300] for c in checks]
    note = _name_mistakes(problem, ctx, checks)  # the problem's note where no mistake explains a check
    assert not any("failed internally" in line or "could not be read" in line for line in note)


def test_a_wrong_number_of_outputs_is_the_learners_failure(answers):
    problem, cases, refs, got = answers
    short = {k: {**r, "outputs": [[]]} if "outputs" in r else r for k, r in got.items()}
    ctx = Context(problem, cases, short, refs, seed=0)
    checks = [_run_check(CHECKS[cid], ctx, pts, True) for cid, pts in problem.points.items()
              if not CHECKS[cid].needs_cuda]
    assert all(c.status == "failed" and "0 outputs came back, expected 1" in c.message for c in checks)


@pytest.mark.parametrize("kind", ["quantized", "subclass", "nested"])
def test_an_earlier_runs_outputs_are_decoded_too(answers, kind):
    """An inference call's earlier outputs (compared by side_effects) are read only once decoded as the outputs are: a
    tensor the grader cannot compare there is the learner's failure of that call, never a crash of the check."""
    problem, cases, refs, got = answers
    make, name = DIRECT[kind]
    odd = {k: (dict(r, earlier=[[make(o) for o in r["earlier"][0]], r["earlier"][1]]) if "earlier" in r else r)
           for k, r in got.items()}
    assert any("earlier" in r for r in got.values())  # the plan has an inference call, answered with its earlier run
    ctx = Context(problem, cases, odd, refs, seed=0)
    check = _run_check(CHECKS["side_effects"], ctx, problem.points["side_effects"], True)
    assert check.status == "failed" and "from the earlier call" in check.message and name in check.message, check.message
