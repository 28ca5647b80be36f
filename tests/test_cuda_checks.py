"""The CUDA checks' judges, proven without a GPU: results are produced on the CPU in the call's
dtype (as a GPU run reports them), then the judges must pass the reference, and fail a result
on the wrong device and a catalogued mistake."""
from __future__ import annotations

import pytest

from attnkit.judge.checks import CHECKS
from attnkit.judge.context import Context, Failed
from attnkit.diagnose.diagnose import candidates
from attnkit.judge.reference import reference
from attnkit.draw.groups import build
from attnkit.run.harness import execute
from attnkit.problems import all_problems
from attnkit.draw.scenarios import as_reference

CASES = [(p, cid) for p in all_problems() for cid in ("cuda", "cuda_half") if cid in p.points]


def judge(problem, cid, target, device="cuda"):
    cases = build(problem, CHECKS[cid].groups, seed=3)
    got, ref = {}, {}
    for key, case in cases.items():
        try:  # the call's own dtype, on the CPU; an error is reported as the worker reports it
            result = execute(dict(case.call, device="cpu"), target)
            got[key] = {"ok": True, **result, "devices": [device] * len(result["devices"])}
        except Exception as exc:  # noqa: BLE001
            got[key] = {"ok": False, "error": {"type": type(exc).__name__, "text": str(exc), "value_error": False}}
        ref[key] = execute(as_reference(case.call), reference(problem))
    CHECKS[cid].judge(Context(problem, cases, got, ref))


@pytest.mark.parametrize("problem,cid", CASES, ids=[f"{p.id}-{c}" for p, c in CASES])
def test_cuda_judges_pass_the_reference_and_fail_wrong_results(problem, cid):
    judge(problem, cid, reference(problem))
    with pytest.raises(Failed, match="expected cuda"):
        judge(problem, cid, reference(problem), device="cpu")
    caught = {c: [] for c in ("cuda", cid)}
    for rid, _, target in candidates(problem)[: len(problem.mistakes)]:
        for c in caught:
            try:
                judge(problem, c, target())
            except Failed:
                caught[c].append(rid)
    # eval-mode calls with valid calls only: dropout-, constructor-, memory- and in-place mistakes cannot show here;
    # half precision then sees at least half of what float64/float32 see
    assert len(caught["cuda"]) >= len(problem.mistakes) // 2, f"cuda caught only {caught['cuda']}"
    assert len(caught[cid]) >= len(caught["cuda"]) // 2, f"{cid} caught only {caught[cid]}"
