"""One grading run's plan: the problems, the seed, whether CUDA is graded, and each problem's seeded cases.

A plan is drawn once per run (`Plan.draw`, which hands each problem's calls to its worker as it draws them) and handed
to everything that works from it: the pool (the CUDA part's calls, `gpu_batches`), the expected values (judge/expected.py) and the judge. The cases depend only on the problem and
the seed, never on the submission. Each group of cases draws from its own seeded generator, so the CUDA checks'
cases are a part of their own (`gpu`), drawn once a worker says it sees a GPU (`with_cuda`, a new plan) and added
to the CPU part (`cpu`), which is drawn before any worker has started.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Mapping

from ..draw.groups import build
from ..draw.scenarios import Case
from ..model.spec import Problem
from .checks import CHECKS
from .registry import grader_groups, problem_hooks, with_hooks
from ..run.hooks import HOOKS

Cases = Mapping[str, Case]  # {case key: Case}


def draw(problem: Problem, seed: int, gpu: bool = False) -> dict[str, Case]:
    """One part of the problem's seeded cases: the CPU checks' (`gpu` False) or the CUDA checks' (True), {key: Case}.
    The same seed always gives the same cases."""
    checks = [CHECKS[c] for c in problem.points if CHECKS[c].needs_cuda == gpu]
    return with_hooks(problem, build(problem, {name: fn for c in checks for name, fn in c.groups.items()}, seed))


def _frozen(parts: dict) -> Mapping[str, Cases]:
    return MappingProxyType({pid: MappingProxyType(cases) for pid, cases in parts.items()})


@dataclass(frozen=True, eq=False)
class Plan:
    """What one grading run grades, built once: `problems` in track order, the `seed` of their hidden inputs, whether
    CUDA is graded (`cuda`), and per problem id its CPU cases (`cpu`) and, once CUDA is graded, the CUDA checks'
    cases (`gpu`; empty before). Compared by identity: it holds tensors."""

    problems: tuple[Problem, ...]
    seed: int
    cpu: Mapping[str, Cases]
    gpu: Mapping[str, Cases] = field(default_factory=lambda: MappingProxyType({}))
    cuda: bool = False

    @classmethod
    def draw(cls, problems, seed: int, drawn=None) -> Plan:
        """The CPU part of every problem's cases: what a run knows before any worker has said whether it sees a GPU.
        `drawn(problem id, calls)`, where given, is told each problem's worker calls as soon as they are drawn (the
        problems likely to run longest first), so that its worker can start on them while the others are drawn."""
        problems = tuple(problems)
        parts = {}
        for p in sorted(problems, key=_likely_weight, reverse=True):
            parts[p.id] = draw(p, seed)
            if drawn is not None:
                drawn(p.id, calls(parts[p.id]))
        return cls(problems, seed, _frozen({p.id: parts[p.id] for p in problems}))

    def with_cuda(self) -> Plan:
        """The same plan with the CUDA checks' cases added (a new value; this one is left as it is)."""
        if self.cuda:
            return self
        return replace(self, gpu=_frozen({p.id: draw(p, self.seed, gpu=True) for p in self.problems}), cuda=True)

    @cached_property
    def _all(self) -> Mapping[str, Cases]:
        return _frozen({p.id: {**self.cpu[p.id], **self.gpu.get(p.id, {})} for p in self.problems})

    def cases(self, problem) -> Cases:
        """Every case of the problem (a Problem or its id) that this plan grades: the CPU part, then the CUDA part."""
        return self._all[getattr(problem, "id", problem)]

    def problem(self, pid: str) -> Problem:
        return next(p for p in self.problems if p.id == pid)

    def gpu_batches(self) -> dict[str, list[dict]]:
        """The CUDA checks' calls, a second batch per worker (empty while CUDA is not graded)."""
        return {p.id: calls(self.gpu[p.id]) for p in self.problems if p.id in self.gpu}


def calls(cases: Cases) -> list[dict]:
    """The calls a worker answers: every case but those the grader runs itself (a fresh import, a source reading), in
    an order of their own, fixed by each case's key (crc32): not group by group, so that no check's calls always come
    first (code that keeps a table in the dtype, size or device of the first call it sees is wrong on later ones, and
    then on some of every check's calls)."""
    mine = [c for c in cases.values() if c.builder not in grader_groups()]
    return [c.call for c in sorted(mine, key=lambda c: zlib.crc32(c.key.encode()))]


def _likely_weight(problem: Problem) -> tuple:
    """A guess at how long a problem's worker runs, before its cases are drawn: a worker hook that slows every call
    (a kernel interpreted) first, then by how many checks times variants it has."""
    return any(HOOKS[name].heavy for name in problem_hooks(problem)), len(problem.points) * len(problem.variants)

