"""Mutation testing proves the hidden checks: mutants of every reference (mutmut's operators) are killed
or listed, with the reason, in grader/dev/equivalent_mutants.json. CI runs a seeded sample; the full run is
`attnkit dev mutants` (see docs/maintainers.md)."""
from __future__ import annotations

import json
import random

import pytest

from attnkit.defaults import DEFAULT_SEED
from attnkit.grading import costly
from attnkit.dev.mutants import EQUIVALENTS, equivalents, kill, mutants, run
from attnkit.judge.expected import References
from attnkit.judge.plan import Plan
from attnkit.problems import all_problems, get

SAMPLE = 5  # mutants per problem in CI, drawn with the seed below


@pytest.mark.slow  # five mutants of every reference graded: the slow suite's (`attnkit dev mutants` grades them all)
@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.id)
def test_a_seeded_sample_of_mutants_is_killed_or_listed(problem):
    result = run([problem], DEFAULT_SEED, sample=SAMPLE, sample_seed=2026)[problem.id]
    assert "reference_fails" not in result, "the harness fails the unmutated reference: every mutant would be killed"
    assert result["mutants"] == min(SAMPLE, len(mutants(problem)))
    assert result["survivors"] == [], "mutants that no check kills (strengthen a check, or list them with the reason)"
    assert result["stale"] == []


LISTED_SAMPLE = 3  # listed equivalents per problem graded in CI; `attnkit dev mutants` grades every one


@pytest.mark.parametrize("costly_ones", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["cheap problems", "kernels stage"])  # a kernels mutant is graded through the interpreter
def test_every_listed_equivalent_mutant_exists_and_survives(costly_ones):
    """The reviewed list stays true: each entry is still a mutant of the current reference and says why, and no
    check kills a seeded sample of them (the full run, `attnkit dev mutants`, reports any killed one as stale)."""
    listed = json.loads(EQUIVALENTS.read_text())
    assert listed, "the reviewed file is empty"
    by_key = {(p.id, m.key): m for p in all_problems() for m in mutants(p)}
    for entry in listed:
        key = (entry["problem"], entry["mutant"])
        assert key in by_key, f"stale entry: {key}"
        assert len(entry["why"]) > 40, key
    assert len(equivalents()) == len(listed)
    plan, references = Plan.draw(all_problems(), DEFAULT_SEED), References()  # drawn and computed once for all
    for problem in [p for p in all_problems() if costly(p) == costly_ones]:
        mine = [e for e in listed if e["problem"] == problem.id]
        for entry in random.Random(f"2026/{problem.id}").sample(mine, min(LISTED_SAMPLE, len(mine))):
            key = (entry["problem"], entry["mutant"])
            assert kill(problem, by_key[key], plan, references) is None, f"{key} is killed: remove it from the list"


def test_a_killed_listed_mutant_is_reported_stale(monkeypatch):
    """The full run's check of the list: a mutant listed as equivalent that a check kills is stale."""
    problem = get("scaled_dot_product_attention")
    scale = next(m for m in mutants(problem) if "d**0.5" in m.key and "d**1.5" in m.key)
    import attnkit.dev.mutants as module

    monkeypatch.setattr(module, "equivalents", lambda: {**equivalents(), (problem.id, scale.key): "listed by mistake"})
    monkeypatch.setattr(module, "mutants", lambda p: [scale])
    assert module.run([problem], DEFAULT_SEED)[problem.id]["stale"] == [scale.key]


def test_a_wrong_reference_line_is_killed():
    """The machinery itself: a mutant that changes the math is killed, by the check that should see it."""
    problem = get("scaled_dot_product_attention")
    scale = next(m for m in mutants(problem) if "d**0.5" in m.key and "d**1.5" in m.key)
    assert kill(problem, scale, Plan.draw([problem], DEFAULT_SEED), References()) is not None


def test_a_harness_that_fails_the_reference_grades_no_mutant(monkeypatch):
    """Were the reference itself failed (a harness that cannot import or run it, as Triton's kernels once were), every
    mutant would count as killed: the run says so instead, and grades none."""
    import attnkit.dev.mutants as module

    problem = get("masked_softmax")
    monkeypatch.setattr(module, "_answers", lambda cases, target: {k: {"ok": False, "error": {
        "type": "RuntimeError", "text": "0 active drivers", "message": "0 active drivers", "value_error": False}}
        for k in cases})
    result = module.run([problem], DEFAULT_SEED, sample=3)[problem.id]
    assert result["reference_fails"] and result["mutants"] == 0 and result["killed"] == 0


def test_the_mutants_clock_counts_work_not_waiting(monkeypatch):
    """A mutant that loops is killed by the clock; one that only waits (as on a machine busy with other work) is not:
    the clock counts this process's CPU time (CI's loaded machine once "killed" a listed equivalent on the wall
    clock)."""
    import attnkit.dev.mutants as mutation

    problem = get("masked_softmax")
    plan, references = Plan.draw([problem], DEFAULT_SEED), References()
    base = mutation.solution_path("masked_softmax").read_text()
    monkeypatch.setattr(mutation, "TIMEOUT", 1)
    limit = mutation.clock(plan.cases(problem))
    waits = base + ("\n\nimport time as _time\n_plain, _waited = masked_softmax, []\n\n\n"
                    "def masked_softmax(*args, **kwargs):\n    if not _waited:\n"
                    f"        _waited.append(_time.sleep({limit + 2}))  # past the clock's limit, doing nothing\n"
                    "    return _plain(*args, **kwargs)\n")
    loops = base + "\n\ndef masked_softmax(*args, **kwargs):\n    while True:\n        pass\n"
    assert mutation.kill(problem, mutation.Mutant(problem.id, "waits", waits), plan, references) is None
    assert mutation.kill(problem, mutation.Mutant(problem.id, "loops", loops), plan, references) == "timeout"
