"""Each check unit declares in one place what it may say and what it takes: the symptom ids its judge gives are
among those it declares, and a spec's options for a check are validated against the check's typed options when the
spec loads."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from attnkit.errors import SpecError
from attnkit.judge.checks import CHECKS, validate_checks
from attnkit.judge.registry import options
from attnkit.problems import get

UNITS = Path(__file__).resolve().parent.parent / "grader" / "judge" / "checks"


def _given(path: Path) -> tuple[set[str], set[str]]:
    """(symptom ids the module's code gives with a failure, check ids it registers)."""
    tree = ast.parse(path.read_text())
    given, registered = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "symptom":
            given |= {n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Check" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant):
                registered.add(first.value)
    return given, registered


@pytest.mark.parametrize("path", sorted(UNITS.glob("*.py")), ids=lambda p: p.name)
def test_every_symptom_a_unit_gives_is_declared(path):
    given, registered = _given(path)
    declared = {n for cid in registered for n in CHECKS[cid].names}
    assert given <= declared, f"{path.name} gives undeclared symptoms {sorted(given - declared)}"


def test_the_scan_sees_a_symptom_given(tmp_path):
    unit = tmp_path / "unit.py"
    unit.write_text('ctx.fail(case, "x", symptom="made_up")\nregister(Check("shapes", "t", {}, None))\n')
    given, registered = _given(unit)
    assert given == {"made_up"} and registered == {"shapes"}


def test_options_are_typed_with_their_defaults():
    flash = get("flash_attention")
    memory = options(flash, "memory")
    assert dataclasses.is_dataclass(memory) and memory.words.bound.startswith("max(")
    assert options(get("masked_softmax"), "parity_float64").blocks({}) == ()  # the default: no block settings


@pytest.mark.parametrize("change,words", [
    (lambda o: {**o, "memory": {**o["memory"], "budget": 3}}, "unknown option(s) budget"),
    (lambda o: {**o, "dropout": {"p": 0.5}}, "options for a check the spec does not have"),
    (lambda o: {**o, "memory": {k: v for k, v in o["memory"].items() if k != "words"}}, "words"),
    (lambda o: {**o, "memory": {k: v for k, v in o["memory"].items() if k != "calls"}}, "'calls'"),
])
def test_a_bad_option_fails_when_the_spec_loads(change, words):
    flash = get("flash_attention")
    broken = dataclasses.replace(flash, options=change(dict(flash.options)))
    with pytest.raises(SpecError, match="options") as err:
        validate_checks(broken)
    assert words in str(err.value)


def test_the_masking_option_drops_the_key_order_calls_alone():
    """A problem whose keys' order matters (local attention) keeps the masking check without its permuted calls."""
    from attnkit.judge.registry import draw

    sdpa = get("scaled_dot_product_attention")
    kept = {c.key.rsplit("/", 1)[1] for c in draw(sdpa, ["mask"], 0).values()}
    ordered = dataclasses.replace(sdpa, options={**(sdpa.options or {}), "masking": {"permuted": False}})
    validate_checks(ordered)
    dropped = {c.key.rsplit("/", 1)[1] for c in draw(ordered, ["mask"], 0).values()}
    assert "permuted" in kept and dropped == kept - {"permuted"}


def test_a_mask_rule_sees_the_whole_call():
    """A rule whose allowed keys depend on the inputs (a window around a computed position) gets the call."""
    from attnkit.judge.context import valid_mask
    from attnkit.judge.registry import draw
    from attnkit.masks import RULES

    problem = get("masked_softmax")
    case = next(c for c in draw(problem, ["base"], 0).values() if c.lens == "query")
    seen = []
    rule = RULES[problem.mask_role]
    original = type(rule).allowed

    def spy(self, problem, cfg, arg, call=None):
        seen.append(call)
        return original(self, problem, cfg, arg, call)

    type(rule).allowed = spy
    try:
        valid_mask(problem, case)
    finally:
        type(rule).allowed = original
    assert seen == [case.call]
