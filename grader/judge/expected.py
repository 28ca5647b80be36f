"""A grading run's expected values: what the reference answers to each seeded call of its plan (judge/plan.py).

They depend only on the problem, the seed and the part of the plan (CPU, or the CUDA checks'), never on the
submission, so the expected values of the CPU part are computed by a helper process forked from the workers'
forkserver (a process that never ran learner code), side by side with the grader's own work: planning, feeding the
workers, judging. Where no forkserver is running (the bubblewrap sandbox has its own server), they are computed
here. Either way they are kept in a `References` store that the run owns: each is computed once per store. A caller
that grades the same problems again in one process (watch, the mutants, a test session) may hold a store and pass
it to every run.
"""
from __future__ import annotations

import os
import pickle
import traceback

from ..draw.scenarios import expected_call
from ..run.harness import execute
from ..run.hooks import for_reference
from .checks import CHECKS
from .plan import Plan, draw
from .reference import reference


class References:
    """The reference's expected values, {case key: result} per (problem id, seed, part), each part computed once: the
    CPU part (`gpu` False) and the CUDA checks' part (True) of a plan."""

    def __init__(self):
        self._values: dict[tuple[str, int, bool], dict] = {}
        self.variants: dict = {}  # the catalogued mistakes' answers on these calls (diagnose/), reused like the values
        self.sent: dict[tuple[str, int], dict] = {}  # per (problem id, seed): the digests of each call's inputs

    def has(self, pid: str, seed: int, gpu: bool = False) -> bool:
        return (pid, seed, gpu) in self._values

    def put(self, pid: str, seed: int, values: dict, gpu: bool = False) -> None:
        self._values[(pid, seed, gpu)] = values

    def part_if_any(self, pid: str, seed: int, gpu: bool = False) -> dict | None:
        """One part's values where computed (or loaded: judge/stored.py), else None."""
        return self._values.get((pid, seed, gpu))

    def drop(self, pid: str, seed: int, gpu: bool = False) -> None:
        self._values.pop((pid, seed, gpu), None)

    def part(self, plan: Plan, problem, gpu: bool = False, between=lambda: None) -> dict:
        """One part's values for the plan's cases, computed here unless already in (`between()` runs after each
        call: the grader reads its workers' pipes meanwhile)."""
        key = (problem.id, plan.seed, gpu)
        if key not in self._values:
            self._values[key] = _compute(problem, (plan.gpu if gpu else plan.cpu)[problem.id], between)
        return self._values[key]

    def of(self, plan: Plan, problem, between=lambda: None) -> dict:
        """{key: the reference's result} for every case of the plan's problem that the reference answers: the CPU
        part, and the CUDA part where the plan grades CUDA."""
        cpu = self.part(plan, problem, False, between)
        return {**cpu, **self.part(plan, problem, True, between)} if plan.cuda else cpu


def expected(plan: Plan, problem, references: References | None = None) -> dict:
    """The expected values of the plan's problem, computed here (kept in `references` where one is given)."""
    return (references if references is not None else References()).of(plan, problem)


def _compute(problem, cases: dict, between=lambda: None) -> dict:
    target = reference(problem)
    refs = {}
    for k, c in cases.items():
        if c.reference:
            refs[k] = execute(for_reference(expected_call(c.call)), target)
            between()
    for cid in problem.points:  # each check's extra expected values (a dropout solver's map, an oracle's outputs)
        if CHECKS[cid].expected is not None:
            CHECKS[cid].expected(problem, cases, target, refs)
    return refs


HELPER_CORES = 4
"""Cores from which the expected values are computed by a helper process. On 2 cores the workers and the grader keep
both busy, and a helper only adds its own start and the values' transfer: measured, 0.5 s more CPU and 1.09x the wall
time for all thirteen problems (benchmarks/helper_cores.py, which measures 3, 4 and 8 cores where a machine has them)."""


def cores() -> int:
    """The cores this process may run on (its affinity where the system says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


class Helper:
    """The expected values of a run's CPU part, computed by a helper process into the run's `References`; `conn` is
    readable when one arrives. It starts before the plan is drawn (its process draws the same cases from the problems
    and the seed: sending them would cost more); each method that computes here is given the run's plan."""

    def __init__(self, problems, seed: int, references: References, side: bool | None = None):
        """`side`: compute in a helper process (True), here (False), or by the cores this process may use (None):
        a helper pays only with a core to spare beyond the workers' and the grader's (HELPER_CORES)."""
        from ..run.forkserver import bare_main, context, running

        self.seed, self.references, self.conn, self.proc = seed, references, None, None
        self.todo = [p for p in problems if not references.has(p.id, seed)]
        self.mine = {p.id for p in self.todo}  # what the helper computes; the rest is in, or computed here
        side = cores() >= HELPER_CORES if side is None else side
        if not self.todo or not side or not running():
            return  # nothing to compute, no core to spare, or starting a forkserver would cost more than it saves
        ctx = context()
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(theirs, [p.id for p in self.todo], seed), daemon=True)
        with bare_main():
            self.proc.start()
        theirs.close()

    def receive(self) -> None:
        """Take every result that has arrived; a helper that failed or ended early leaves its problems to get()."""
        while self.conn is not None and self.conn.poll():
            try:
                pid, refs = pickle.loads(self.conn.recv_bytes())  # a trusted process: forked before any learner code
            except (EOFError, OSError, pickle.UnpicklingError):
                self.close()
                return
            if refs is None:  # the helper failed on this problem: the grader's own run says why
                self.close()
                return
            self.references.put(pid, self.seed, refs)

    def ready(self, problem) -> bool:
        return self.conn is None or problem.id not in self.mine or self.references.has(problem.id, self.seed)

    def get(self, plan: Plan, problem, between=lambda: None) -> dict:
        """The expected values for the plan's `problem`: the helper's CPU part (waited for), the CUDA checks' part
        computed here."""
        assert plan.seed == self.seed, "the helper computes another seed's values"
        while self.conn is not None and problem.id in self.mine and not self.references.has(problem.id, self.seed):
            self.conn.poll(None)
            self.receive()
        return self.references.of(plan, problem, between)

    def compute_next(self, plan: Plan, waiting, between=lambda: None) -> bool:
        """Compute here the expected values of one problem of `waiting`, while the grader has nothing else to do:
        without a helper, the next one; with one, its CUDA part, or else the last problem the helper has not reached
        (it works from the first, so both finish together; the helper is told to skip it). False when none is left."""
        for p in waiting:
            if not self.references.has(p.id, self.seed, plan.cuda) and self.ready(p):
                self.get(plan, p, between)
                return True
        left = [p for p in self.todo if not self.references.has(p.id, self.seed)] if self.conn is not None else []
        for p in reversed(left[1:]):  # never the first: the helper may be computing it now
            if p in waiting:
                try:
                    self.conn.send_bytes(p.id.encode())
                except OSError:
                    pass
                self.references.part(plan, p, False, between)
                return True
        return False

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
            self.proc = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _serve(conn, ids: list[str], seed: int) -> None:
    """The helper process: each problem's expected values (its CPU part, drawn here as the grader draws it) as soon as
    they are computed; None for a failure."""
    import torch

    from ..problems import get

    torch.set_num_threads(1)
    taken = set()  # computed by the grader itself
    for pid in ids:
        while conn.poll():
            taken.add(conn.recv_bytes().decode())
        if pid in taken:
            continue
        try:
            problem = get(pid)
            refs = _compute(problem, draw(problem, seed))
        except Exception:  # noqa: BLE001 - the grader computes it again itself and reports the failure
            traceback.print_exc()
            conn.send_bytes(pickle.dumps((pid, None)))
            return
        conn.send_bytes(pickle.dumps((pid, refs), protocol=pickle.HIGHEST_PROTOCOL))
    conn.close()
