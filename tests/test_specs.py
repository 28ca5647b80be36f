"""Specs are validated when loaded: each broken field fails with one message naming the spec and the field,
and the commands show it as one line (exit 3: the kit's fault), never as a missing plugin or a dropped problem."""
from __future__ import annotations

import dataclasses

import pytest

from attnkit.errors import SpecError
from attnkit.judge.checks import validate_checks
from attnkit.model.spec import Mistake
from attnkit.model.validate import validate
from attnkit.problems import ORDER, all_problems, get


@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.id)
def test_every_shipped_spec_is_valid(problem):
    validate(problem, problem.id, ORDER)
    validate_checks(problem)


def _broken(field: str):
    p = get("luong_attention", "en")
    if field == "check id":
        return dataclasses.replace(p, points={**p.points, "parity_floa64": 1})
    if field == "track":
        return dataclasses.replace(p, track="scorng")
    if field == "requires":
        return dataclasses.replace(p, requires=("masked_softmx",))
    if field == "patch":
        stale = Mistake("stale", "a patch of code the reference no longer has", (("scores = scores * 2", "x"),))
        return dataclasses.replace(p, mistakes=p.mistakes + (stale,))
    if field == "id":
        return dataclasses.replace(p, id="luong")
    if field == "visibility":
        return dataclasses.replace(p, visibility={"masking": "after_due", "parity_floa64": "hidden"})
    forward = p.methods[-1]
    if field == "arg role":
        args = (forward.args[0]._replace(role="queries"),) + forward.args[1:]
        return dataclasses.replace(p, methods=p.methods[:-1] + (dataclasses.replace(forward, args=args),))
    if field == "output role":
        returns = (forward.returns[0]._replace(role="weights"),) + forward.returns[1:]
        return dataclasses.replace(p, methods=p.methods[:-1] + (dataclasses.replace(forward, returns=returns),))
    if field == "output dims":
        returns = (forward.returns[0]._replace(doc="the attention output"),) + forward.returns[1:]
        return dataclasses.replace(p, methods=p.methods[:-1] + (dataclasses.replace(forward, returns=returns),))
    if field == "check needs a role":  # no output plays the weights: a check that sums them cannot apply
        returns = (forward.returns[0], forward.returns[1]._replace(role="values"))
        return dataclasses.replace(p, methods=p.methods[:-1] + (dataclasses.replace(forward, returns=returns),))
    raise AssertionError(field)


@pytest.mark.parametrize("field,expected", [
    ("check id", "field points: unknown check id 'parity_floa64'"),
    ("track", "field track 'scorng' is not a track"),
    ("requires", "field requires names unknown problems ['masked_softmx']"),
    ("patch", "mistake 'stale': its patch no longer applies to the reference"),
    ("id", "field id is 'luong', not the file's name 'luong_attention'"),
    ("visibility", "field visibility must map checks of field points to one of hidden, after_due_date, after_published, "
                   "visible (unknown checks: parity_floa64)"),
    ("arg role", "field methods[1].args: argument 'queries' has role 'queries'"),
    ("output role", "more than one output with role 'weights'"),
    ("output dims", "output 'output' needs named dims"),
    ("check needs a role", "field points: check 'weight_sums' needs an output with role 'weights'"),
])
def test_a_broken_field_is_named(field, expected):
    problem = _broken(field)
    with pytest.raises(SpecError) as info:
        validate(problem, "luong_attention", ORDER)
        validate_checks(problem)
    assert "spec grader/problems/luong_attention.py" in str(info.value) and expected in str(info.value), str(info.value)


def test_attnkit_grade_names_a_broken_spec_in_one_line(monkeypatch, capsys):
    """A typo in a check id reaches the user as one line naming spec and field, exit 3 (no grading, no
    "is attnkit installed?")."""
    import attnkit.problems as registry
    from attnkit.fronts.cli import main

    real = registry.get
    monkeypatch.setattr(registry, "get", lambda pid, lang=None: _broken("check id") if pid == "luong_attention"
                        else real(pid, lang))
    code = main(["grade", "--impl", "solutions", "--problems", "masked"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "unknown check id 'parity_floa64'" in err[0], err
