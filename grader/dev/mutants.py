"""Mutation testing of the hidden checks: `attnkit dev mutants`.

Mutants of each reference solution come from mutmut's own mutation operators (numbers,
strings, names, operators, keywords, arguments removed, assignments: its
`create_mutations`, configured by `[tool.mutmut]` in pyproject.toml). mutmut's runner
expects a test suite per source file; here the "test suite" is the problem's hidden
checks, so each mutant is graded in this process exactly as diagnosis runs a catalogued
variant: the mutated reference answers the problem's seeded calls, and each CPU check
judges the answers. A mutant is killed when some check fails it. A surviving mutant must
be listed, with the reason it cannot be told apart from the reference, in
grader/dev/equivalent_mutants.json (reviewed by hand); `killed K/N` counts the others.
"""
from __future__ import annotations

import contextlib
import difflib
import json
import os
import random
import signal
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import ROOT
from ..judge.checks import CHECKS
from ..judge.context import Context, Failed
from .. import solution_path
from ..judge.expected import References
from ..judge.plan import Plan
from ..judge.reference import reference_like
from ..run.harness import execute
from ..run.hooks import grace, outside
from ..judge.registry import grader_groups

EQUIVALENTS = Path(__file__).with_name("equivalent_mutants.json")
TIMEOUT = 20  # CPU seconds for one mutant's calls (per torch thread): a mutant that loops is killed by the clock


@dataclass(frozen=True)
class Mutant:
    problem: str
    key: str  # "line N: old => new": stable while the reference's line stays the same
    source: str


def mutants(problem) -> list[Mutant]:
    """Every mutant mutmut's operators make of the problem's reference, in source order."""
    from mutmut.mutation.file_mutation import create_mutations

    code = solution_path(problem.id).read_text()
    with _cwd(ROOT):  # mutmut reads its [tool.mutmut] configuration from the working directory
        module, mutations, _, _ = create_mutations(f"solutions/{problem.id}.py", code)
    out, seen = [], set()
    for m in mutations:
        source = module.deep_replace(m.original_node, m.mutated_node).code
        key = _key(code, source)
        if key and key not in seen:
            seen.add(key)
            out.append(Mutant(problem.id, key, source))
    return out


def _key(old: str, new: str) -> str:
    a, b = old.splitlines(), new.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            before = " / ".join(x.strip() for x in a[i1:i2])
            after = " / ".join(x.strip() for x in b[j1:j2])
            return f"line {i1 + 1}: {before} => {after}"
    return ""


@contextlib.contextmanager
def _cwd(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def equivalents() -> dict[tuple[str, str], str]:
    """{(problem, mutant key): why it is equivalent} from the reviewed file."""
    if not EQUIVALENTS.exists():
        return {}
    return {(e["problem"], e["mutant"]): e["why"] for e in json.loads(EQUIVALENTS.read_text())}


class _Timeout(Exception):
    pass


def kill(problem, mutant: Mutant, plan: Plan, references: References) -> str | None:
    """The id of the first check that fails the mutant (with why, for a crash), or None if it survives: judged on the
    plan's cases of the problem (its CPU part), against the reference's values kept in `references` (computed once
    for all the mutants of a problem)."""
    with tempfile.TemporaryDirectory(prefix="attnkit-mutant-") as tmp:
        path = Path(tmp) / f"{problem.id}.py"  # a file of its own: the on-chip check compiles the kernels from it
        path.write_text(mutant.source)
        try:  # imported as the reference is (Triton's kernels interpreted), its source readable (triton.jit reads it)
            target = getattr(reference_like(problem, mutant.source, str(path), f"_mutant_{problem.id}"), problem.symbol)
        except Exception as exc:  # noqa: BLE001 - a mutant that does not even load is killed
            return f"load ({type(exc).__name__})"
        got = _answers(plan.cases(problem), target)
        if got is None:
            return "timeout"
        return _first_failing(problem, plan, got, references)


def _first_failing(problem, plan: Plan, got: dict, references: References) -> str | None:
    ctx = Context(problem, plan.cases(problem), got, references.of(plan, problem), None, plan.seed)
    for cid in problem.points:
        check = CHECKS[cid]
        if check.needs_cuda or check.answer is not None:
            continue
        try:
            check.judge(ctx)
        except Failed:
            return cid
    return None


def clock(plan) -> float:
    """The CPU seconds a mutant's calls (`plan`: one problem's cases) may take, and the grader's compiling: this
    process's CPU time, not the wall clock, since a mutant that loops works all along where a busy machine (CI's two
    cores, running the other half of a test suite) only makes it wait; each of torch's threads counts."""
    return (TIMEOUT + sum(grace(case.call) for case in plan.values())) * max(1, torch.get_num_threads())


def _answers(plan, target) -> dict | None:
    got = {}

    def alarm(*_):
        raise _Timeout

    old = signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, clock(plan))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for key, case in plan.items():
                if case.group in grader_groups():  # answered by the grader, never by a call
                    continue
                # a backstop's own resident count means nothing in this long-lived process (its heap is the test
                # run's): the grader measures it from outside a worker; here the small memory calls' dispatch mode
                # is what kills a mutant that builds the forbidden tensor
                call = outside(case.call)
                try:
                    got[key] = {"ok": True, **execute(call, target)}
                except _Timeout:
                    raise
                except Exception as exc:  # noqa: BLE001 - like the learner's code, a mutant may raise
                    got[key] = {"ok": False, "error": {"type": type(exc).__name__, "text": str(exc)[:300],
                                                       "message": str(exc)[:300], "value_error": isinstance(exc, ValueError)}}
    except _Timeout:
        return None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
    return got


def run(problems, seed: int, sample: int | None = None, sample_seed: int = 0, progress=None,
        references: References | None = None) -> dict:
    """{problem: {"mutants": N, "killed": K, "equivalent": E, "survivors": [key, ...], "stale": [key, ...]}}, and
    "reference_fails": the check that fails the unmutated reference where one does (then no mutant is graded: each
    would be "killed" by the harness, not by the checks).

    "stale": listed as equivalent, but no longer a mutant of the reference, or killed by a check after all.
    With `sample`, only that many mutants per problem (drawn with `sample_seed`) are graded. The problems' cases are
    drawn once (one plan, CPU only) and the reference's values computed once, into `references` where given."""
    listed = equivalents()
    plan = Plan.draw(problems, seed)
    references = references if references is not None else References()
    out = {}
    for problem in problems:
        unmutated = Mutant(problem.id, "unmutated", solution_path(problem.id).read_text())
        broken = kill(problem, unmutated, plan, references)  # a harness that fails the reference kills every mutant
        if broken:
            out[problem.id] = {"mutants": 0, "killed": 0, "equivalent": 0, "survivors": [], "stale": [],
                               "reference_fails": broken}
            continue
        every = mutants(problem)
        keys = {m.key for m in every}
        chosen = every if sample is None else random.Random(f"{sample_seed}/{problem.id}").sample(every, min(sample, len(every)))
        killed, equivalent, survivors, wrongly_listed = 0, 0, [], []
        for m in chosen:
            by = kill(problem, m, plan, references)
            if by:
                killed += 1
                if (problem.id, m.key) in listed:
                    wrongly_listed.append(m.key)
            elif (problem.id, m.key) in listed:
                equivalent += 1
            else:
                survivors.append(m.key)
            if progress:
                progress(problem.id, m, by)
        stale = sorted([k for p, k in listed if p == problem.id and k not in keys] + wrongly_listed)
        out[problem.id] = {"mutants": len(chosen), "killed": killed, "equivalent": equivalent,
                           "survivors": survivors, "stale": stale}
    return out
