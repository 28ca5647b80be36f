"""Submissions graded several to a grading run, each judged as if graded alone.

A grading run grades its problems side by side (one worker each, the grader judging meanwhile) and pays its start once:
grading four unrelated problems' files in one run costs about what one of them costs alone on two cores. The suites
that grade hundreds of one-file submissions (every catalogued mistake, every unseen file) grade them this way.

Why each case's verdict is its own: each problem's hidden calls are drawn from the seed and the problem alone
(judge/plan.py), its worker imports its own file, and a run's problems are pairwise unrelated (none imports another
one's module), so no file of a case reaches another case's problem. A problem that imports a case's module (a
dependent: `requires`) is never another case of the same run; where a test grades the dependents of a case too, they
import a correct private copy of the case's module (`_<id>_ok.py`).
Each case's report holds its own problems only (`Together.report`).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Hashable

from conftest import SOLUTIONS, grade_shared, make_impl
from attnkit.grading import costly
from attnkit.problems import all_problems, get

SIZE = 4
"""Cases per grading run: with their dependents, a run's workers stay within what one full grading starts."""
TIMEOUT = 60.0
"""Each worker's wall-clock limit in a shared run: its problem's workers share two cores with the others' (the
default's 30 s is for a problem's worker among a run's; these tests are about verdicts, not time limits)."""


def _related(a: str, b: str) -> bool:
    return a == b or a in get(b).requires or b in get(a).requires


class Together:
    """Cases (key -> problem id and the source of its file) graded in shared runs; `report(key)` grades the run that
    holds the key, with the cases registered and not yet graded that fit beside it, and gives the key's report.
    `dependents`: the problems that import a case's module are graded with it, each importing a correct private copy
    of it (the case's mistake is seen by its own problem alone), else the case's problem alone is graded."""

    def __init__(self, root: Callable[[str], Path], dependents: bool = False):
        self.root, self.dependents = root, dependents
        self.cases: dict[Hashable, tuple[str, str]] = {}
        self.reports: dict = {}

    def add(self, key: Hashable, pid: str, source: str) -> None:
        self.cases.setdefault(key, (pid, source))

    def _affected(self, pid: str) -> list[str]:
        """The case's problem, then those graded with it."""
        return [p.id for p in all_problems() if p.id == pid or (self.dependents and pid in p.requires)]

    def _run(self, key) -> list:
        run = [key]
        if costly(get(self.cases[key][0])):
            return run  # its kernels run in the interpreter, then its diagnosis in the grader: two beside each other
            # took longer than one after the other (measured: 89 s against 70 s for two mistakes), alone it is
        for other, (pid, _) in self.cases.items():
            if len(run) == SIZE:
                break
            if other in self.reports or other in run or costly(get(pid)):
                continue
            if not any(_related(p, a) for k in run for a in self._affected(self.cases[k][0])
                       for p in self._affected(pid)):
                run.append(other)
        return run

    def report(self, key):
        if key not in self.reports:
            run = self._run(key)
            files, chosen = {}, []
            for k in run:
                pid, source = self.cases[k]
                files[f"{pid}.py"] = source
                for dependent in self._affected(pid)[1:]:
                    files[f"_{pid}_ok.py"] = (SOLUTIONS / f"{pid}.py").read_text()
                    text = (SOLUTIONS / f"{dependent}.py").read_text()
                    files[f"{dependent}.py"] = text.replace(f"from .{pid} import", f"from ._{pid}_ok import")
                chosen += self._affected(pid)
            impl = make_impl(self.root("-".join(sorted(self.cases[k][0] for k in run))), files)
            whole = grade_shared(impl, chosen, timeout=TIMEOUT)
            for k in run:
                own = [p for p in whole.problems if p.id in self._affected(self.cases[k][0])]
                self.reports[k] = replace(whole, problems=own, score=sum(p.score for p in own),
                                          max_score=sum(p.max_score for p in own))
        return self.reports[key]


def selected(request, *names: str, test: str | None = None) -> list[tuple]:
    """The parameters `names` of this module's selected tests (of the function `test` alone, where given), in the
    order they run: the cases to register first, so that the runs hold the cases about to be asked for (a test left
    out by -k or -m is never graded)."""
    out = []
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (item.module is request.module and all(n in params for n in names)
                and test in (None, getattr(item, "originalname", None))):
            out.append(tuple(params[n] for n in names))
    return out
