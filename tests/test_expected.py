"""Expected values from the helper process (grader/judge/expected.py): the same values as computed here, the
grader's share taken from the end of the list, failures computed again by the grader, nothing left running."""
from __future__ import annotations

import torch

from attnkit.judge import expected as E
from attnkit.problems import get
from attnkit.run import forkserver

SEED = 424242  # a seed no other test grades with: the module's caches start empty for it
IDS = ("masked_softmax", "rope", "flash_attention", "grouped_query_attention")


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _forget(seed: int) -> None:
    for key in [k for k in E._REFS if k[1] == seed]:
        del E._REFS[key]


def test_the_helper_computes_what_the_grader_would():
    forkserver.warm_up()
    problems = [get(pid) for pid in IDS]
    helper = E.Helper(problems, SEED)
    try:
        assert helper.proc is not None, "the forkserver runs: the helper process must be used"
        assert helper.compute_next(problems, False)  # the grader's own share: the last problem, the helper told
        got = {p.id: helper.get(p, False) for p in problems}
    finally:
        helper.close()
    assert not helper.proc and helper.conn is None
    for p in problems:
        here = E._compute(p, E.plan(p, SEED, False))
        assert got[p.id].keys() == here.keys() and _same(got[p.id], here), p.id
    _forget(SEED)


def test_without_a_forkserver_the_grader_computes_them_itself(monkeypatch):
    monkeypatch.setattr(forkserver, "running", lambda: False)
    p = get("rope")
    helper = E.Helper([p], SEED + 1)
    assert helper.proc is None and helper.ready(p)
    assert helper.compute_next([p], False) and (p.id, SEED + 1, False) in E._REFS
    assert not helper.compute_next([p], False)  # nothing left
    _forget(SEED + 1)


def test_a_failing_helper_leaves_the_problem_to_the_grader():
    """The helper ends before it answers (killed here; a reference that fails there ends it the same way): the grader
    computes the values itself, so that a real failure is raised and reported where it happens."""
    forkserver.warm_up()
    p = get("rope")
    helper = E.Helper([p], SEED + 2)
    try:
        helper.proc.kill()  # a helper that dies before it answers
        values = helper.get(p, False)
    finally:
        helper.close()
    assert _same(values, E._compute(p, E.plan(p, SEED + 2, False)))
    _forget(SEED + 2)
