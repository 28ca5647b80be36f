"""A grading run's seeded calls and their expected values (what the reference answers to each).

Both depend only on the problem, the seed and whether a GPU is graded, never on the submission, so
the expected values of the CPU plan are computed by a helper process forked from the workers'
forkserver (a process that never ran learner code), side by side with the grader's own work:
planning, feeding the workers, judging. Where no forkserver is running (the bubblewrap sandbox has
its own server), they are computed here. Either way each is computed once per process.
"""
from __future__ import annotations

import pickle
import traceback

from ..draw.groups import build
from ..draw.scenarios import expected_call
from ..run.harness import execute
from ..run.hooks import for_reference
from .checks import CHECKS
from .registry import with_hooks
from .reference import reference

_PLANS: dict = {}
_REFS: dict = {}


def plan(problem, seed: int, cuda: bool) -> dict:
    """The problem's seeded cases, {key: Case} (cached: the same seed always gives the same calls). Each group
    draws from its own seeded generator, so the CUDA checks' groups are added to the CPU plan, which is drawn
    before any worker says whether it sees a GPU."""
    key = (problem.id, seed, cuda)
    if key not in _PLANS:
        checks = [CHECKS[c] for c in problem.points if CHECKS[c].needs_cuda == cuda]
        part = with_hooks(problem, build(problem, {name: fn for c in checks for name, fn in c.groups.items()}, seed))
        _PLANS[key] = {**plan(problem, seed, False), **part} if cuda else part
    return _PLANS[key]


def expected(problem, seed: int, cuda: bool, between=lambda: None) -> dict:
    """{key: the reference's result} for every call of the plan the reference answers, computed here; `between()`
    runs after each call (the grader reads its workers' pipes meanwhile)."""
    key = (problem.id, seed, cuda)
    if key not in _REFS:
        _REFS[key] = _compute(problem, plan(problem, seed, cuda), between)
    return _REFS[key]


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


class Helper:
    """The expected values of the CPU plans, computed by a helper process; `conn` is readable when one arrives."""

    def __init__(self, problems, seed: int):
        from ..run.forkserver import bare_main, context, running

        self.seed, self.conn, self.proc = seed, None, None
        self.todo = [p for p in problems if (p.id, seed, False) not in _REFS]
        if not self.todo or not running():
            return  # nothing to compute, or starting a forkserver (importing torch) would cost more than it saves
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
            _REFS[(pid, self.seed, False)] = refs

    def ready(self, problem) -> bool:
        return self.conn is None or (problem.id, self.seed, False) in _REFS

    def get(self, problem, cuda: bool, between=lambda: None) -> dict:
        """The expected values for `problem`: the helper's CPU part (waited for), the CUDA checks' part computed here."""
        key = (problem.id, self.seed, False)
        while self.conn is not None and key not in _REFS:
            self.conn.poll(None)
            self.receive()
        if not cuda:
            return expected(problem, self.seed, False, between)
        both = (problem.id, self.seed, True)
        if both not in _REFS:
            cpu = expected(problem, self.seed, False, between)
            extra = {k: c for k, c in plan(problem, self.seed, True).items() if k not in plan(problem, self.seed, False)}
            _REFS[both] = {**cpu, **_compute(problem, extra, between)}
        return _REFS[both]

    def compute_next(self, waiting, cuda: bool, between=lambda: None) -> bool:
        """Compute here the expected values of one problem of `waiting`, while the grader has nothing else to do:
        without a helper, the next one; with one, its CUDA part, or else the last problem the helper has not reached
        (it works from the first, so both finish together; the helper is told to skip it). False when none is left."""
        for p in waiting:
            if (p.id, self.seed, cuda) not in _REFS and self.ready(p):
                self.get(p, cuda, between)
                return True
        left = [p for p in self.todo if (p.id, self.seed, False) not in _REFS] if self.conn is not None else []
        for p in reversed(left[1:]):  # never the first: the helper may be computing it now
            if p in waiting:
                try:
                    self.conn.send_bytes(p.id.encode())
                except OSError:
                    pass
                expected(p, self.seed, False, between)
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
    """The helper process: each problem's expected values as soon as they are computed; None for a failure."""
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
            refs = expected(get(pid), seed, False)
        except Exception:  # noqa: BLE001 - the grader computes it again itself and reports the failure
            traceback.print_exc()
            conn.send_bytes(pickle.dumps((pid, None)))
            return
        conn.send_bytes(pickle.dumps((pid, refs), protocol=pickle.HIGHEST_PROTOCOL))
    conn.close()
