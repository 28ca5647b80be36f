"""Mutation testing proves the hidden checks: mutants of every reference (mutmut's operators) are killed
or listed, with the reason, in grader/equivalent_mutants.json. CI runs a seeded sample; the full run is
`attnkit dev mutants` (see the README)."""
from __future__ import annotations

import json

import pytest

from attnkit.defaults import DEFAULT_SEED
from attnkit.dev.mutants import EQUIVALENTS, equivalents, kill, mutants, run
from attnkit.problems import all_problems, get

SAMPLE = 5  # mutants per problem in CI, drawn with the seed below


@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.id)
def test_a_seeded_sample_of_mutants_is_killed_or_listed(problem):
    result = run([problem], DEFAULT_SEED, sample=SAMPLE, sample_seed=2026)[problem.id]
    assert result["mutants"] == min(SAMPLE, len(mutants(problem)))
    assert result["survivors"] == [], "mutants that no check kills (strengthen a check, or list them with the reason)"
    assert result["stale"] == []


def test_every_listed_equivalent_mutant_exists_and_survives():
    """The reviewed list stays true: each entry is still a mutant of the current reference, no check kills it,
    and it says why."""
    listed = json.loads(EQUIVALENTS.read_text())
    assert listed, "the reviewed file is empty"
    by_key = {(p.id, m.key): m for p in all_problems() for m in mutants(p)}
    for entry in listed:
        key = (entry["problem"], entry["mutant"])
        assert key in by_key, f"stale entry: {key}"
        assert len(entry["why"]) > 40, key
        assert kill(get(entry["problem"]), by_key[key], DEFAULT_SEED) is None, f"{key} is killed: remove it from the list"
    assert len(equivalents()) == len(listed)


def test_a_wrong_reference_line_is_killed():
    """The machinery itself: a mutant that changes the math is killed, by the check that should see it."""
    problem = get("scaled_dot_product_attention")
    scale = next(m for m in mutants(problem) if "d**0.5" in m.key and "d**1.5" in m.key)
    assert kill(problem, scale, DEFAULT_SEED) is not None
