"""Expected values from the helper process (grader/judge/expected.py): the same values as computed here, the
grader's share taken from the end of the list, failures computed again by the grader, nothing left running."""
from __future__ import annotations

import pytest
import torch

from conftest import SANDBOXES

from attnkit.judge import expected as E
from attnkit.judge.plan import Plan
from attnkit.judge.registry import grader_groups
from attnkit.problems import get
from attnkit.run import forkserver

SEED = 424242  # a seed no other test grades with
IDS = ("masked_softmax", "rope", "flash_attention", "grouped_query_attention")


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def test_the_helper_computes_what_the_grader_would():
    forkserver.warm_up()
    problems = [get(pid) for pid in IDS]
    plan, references = Plan.draw(problems, SEED), E.References()
    helper = E.Helper(problems, SEED, references, side=True)
    try:
        assert helper.proc is not None, "the forkserver runs: the helper process must be used"
        assert helper.compute_next(plan, problems)  # the grader's own share: the last problem, the helper told
        got = {p.id: helper.get(plan, p) for p in problems}
    finally:
        helper.close()
    assert not helper.proc and helper.conn is None
    for p in problems:
        here = E._compute(p, plan.cases(p))
        assert got[p.id].keys() == here.keys() and _same(got[p.id], here), p.id


def test_without_a_core_to_spare_the_grader_computes_them_itself(monkeypatch):
    forkserver.warm_up()
    monkeypatch.setattr(E, "cores", lambda: E.HELPER_CORES - 1)
    p = get("rope")
    helper = E.Helper([p], SEED + 3, E.References())
    assert helper.proc is None and helper.conn is None
    monkeypatch.setattr(E, "cores", lambda: E.HELPER_CORES)
    helper = E.Helper([p], SEED + 3, E.References())
    try:
        assert helper.proc is not None
    finally:
        helper.close()


def test_without_a_forkserver_the_grader_computes_them_itself(monkeypatch):
    monkeypatch.setattr(forkserver, "running", lambda: False)
    p = get("rope")
    plan, references = Plan.draw([p], SEED + 1), E.References()
    helper = E.Helper([p], SEED + 1, references)
    assert helper.proc is None and helper.ready(p)
    assert helper.compute_next(plan, [p]) and references.has(p.id, SEED + 1)
    assert not helper.compute_next(plan, [p])  # nothing left


def test_a_failing_helper_leaves_the_problem_to_the_grader():
    """The helper ends before it answers (killed here; a reference that fails there ends it the same way): the grader
    computes the values itself, so that a real failure is raised and reported where it happens."""
    forkserver.warm_up()
    p = get("rope")
    plan = Plan.draw([p], SEED + 2)
    helper = E.Helper([p], SEED + 2, E.References(), side=True)
    try:
        helper.proc.kill()  # a helper that dies before it answers
        values = helper.get(plan, p)
    finally:
        helper.close()
    assert _same(values, E._compute(p, plan.cases(p)))


def test_a_store_computes_each_part_once_and_a_run_owns_its_own(monkeypatch):
    """The expected values are kept in the store a run is given (a new one per run by default): a store held across
    runs computes each problem's part once; nothing is kept between runs that hold none."""
    calls = []
    real = E._compute
    monkeypatch.setattr(E, "_compute", lambda problem, cases, between=lambda: None: calls.append(problem.id) or
                        real(problem, cases, between))
    p = get("masked_softmax")
    plan, references = Plan.draw([p], SEED + 3), E.References()
    first = references.of(plan, p)
    assert references.of(Plan.draw([p], SEED + 3), p) is first and calls == [p.id]  # a new plan, the same values
    E.expected(plan, p)
    E.expected(plan, p)
    assert calls == [p.id] * 3  # without a store, each call computes its own


def test_the_cuda_part_is_a_new_plan():
    """A plan's CUDA part is added by with_cuda(), a new value: the CPU plan keeps its cases, and the CUDA checks'
    cases come after them."""
    p = get("scaled_dot_product_attention")
    cpu = Plan.draw([p], SEED)
    both = cpu.with_cuda()
    assert not cpu.cuda and both.cuda and both.with_cuda() is both and not cpu.gpu
    assert list(both.cases(p))[:len(cpu.cases(p))] == list(cpu.cases(p))
    assert set(both.cases(p)) - set(cpu.cases(p)) == set(both.gpu[p.id]) != set()
    assert both.gpu_batches()[p.id] and not cpu.gpu_batches()
    drawn = []
    Plan.draw([p], SEED, lambda pid, calls: drawn.append((pid, len(calls))))
    assert drawn == [(p.id, sum(c.builder not in grader_groups() for c in cpu.cases(p).values()))]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_grader_computes_expected_values_while_the_workers_start(monkeypatch, sandbox):
    """While the workers' server (the forkserver, or the sandbox's) imports torch (a second), the grader computes
    expected values instead of waiting: some are in by the time every worker has said hello, and the grade is the
    same."""
    from conftest import SOLUTIONS
    from attnkit.grading import grade
    from attnkit.run import jail_process
    from attnkit.run.pool import Pool

    forkserver.stop()  # a cold start: the server imports torch during this run
    jail_process.stop()
    monkeypatch.setattr(E, "cores", lambda: E.HELPER_CORES - 1)  # no helper process: the grader's own work
    store, seen = E.References(), []
    original = Pool.wait_hello

    def wait_hello(pool, idle=lambda: False):
        original(pool, idle)
        seen.append({pid for pid in IDS if store.has(pid, SEED + 7)})

    monkeypatch.setattr(Pool, "wait_hello", wait_hello)
    report = grade(SOLUTIONS, list(IDS), seed=SEED + 7, sandbox=sandbox, references=store)
    assert report.score == report.max_score
    assert seen and seen[0], "no expected value was computed while the workers started"
