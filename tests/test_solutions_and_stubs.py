"""Every solution gets full marks through the learner's loader; every stub is not started."""
from __future__ import annotations

import ast

import pytest

from conftest import SOLUTIONS
from attnkit import ROOT
from attnkit.grading import grade
from attnkit.problems import all_problems, get
from attnkit.model.stubs import is_untouched_stub, render

PROBLEMS = all_problems()


def test_solutions_get_full_marks(solutions_report):
    for p in solutions_report.problems:
        ran = [c for c in p.checks if c.status != "skipped"]
        assert p.status == "passed", [(c.id, c.message) for c in ran if c.status != "passed"]
        assert p.score == p.max_score == sum(c.max_score for c in ran) > 0
    assert solutions_report.score == solutions_report.max_score


def test_cuda_checks_are_skipped_visibly_without_a_gpu(solutions_report):
    if solutions_report.devices["cuda"]:
        pytest.skip("a GPU is present: the CUDA checks ran")
    for p in solutions_report.problems:
        cuda = [c for c in p.checks if c.id.startswith("cuda")]
        assert bool(cuda) == any(c.startswith("cuda") for c in get(p.id).points)
        assert all(c.status == "skipped" and "no CUDA device" in c.message for c in cuda)
        assert all(c.max_score == 0 for c in cuda)  # excluded from the maximum


def test_rendered_stubs_are_not_started(tmp_path):
    for p in PROBLEMS:
        (tmp_path / f"{p.id}.py").write_text(render(p))
    report = grade(tmp_path)
    for p in report.problems:
        assert p.status == "not_started" and p.score == 0
        assert "NotImplementedError" in p.checks[0].message


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.id)
def test_stub_keeps_the_solution_signatures(problem):
    """The stub (generated from the spec) declares exactly the reference's signatures."""
    def signatures(source):
        tree = ast.parse(source)
        return {
            node.name: ast.unparse(node.args)
            for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
            and node.name in {"__init__", "forward", problem.symbol}
        }

    stub = render(problem)
    assert is_untouched_stub(stub)
    assert "pass\n" not in stub
    assert signatures(stub) == signatures((SOLUTIONS / f"{problem.id}.py").read_text())


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.id)
def test_stub_docstrings_name_every_dimension(problem):
    stub = render(problem)
    for method in problem.methods:
        for name, *_ in method.args:
            assert f"{name}: " in stub


def test_is_untouched_stub_tells_work_from_stubs():
    assert is_untouched_stub('def f(x):\n    """doc"""\n    raise NotImplementedError("f")\n')
    assert not is_untouched_stub('def f(x):\n    """doc"""\n    return x\n')
    assert not is_untouched_stub("def f(x):\n    pass\n")
    assert not is_untouched_stub("def f(:\n")


def test_exercises_hold_the_generated_stubs():
    for p in PROBLEMS:
        text = (ROOT / "exercises" / f"{p.id}.py").read_text()
        if not is_untouched_stub(text):
            pytest.skip(f"exercises/{p.id}.py holds your work; its freshness is checked on a fresh clone")
        assert text == render(p), "run `attnkit dev sync`"


@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.id)
def test_every_reference_passes_its_public_checks(problem):
    """The quick checks learners and candidates see (notebooks, bundles' test_public.py) follow the contract: a
    reference never fails them (local-p's rows sum to less than 1, and its public check must not ask for 1)."""
    from attnkit.integrations.public import quick_checks
    from attnkit.judge.reference import reference

    from attnkit.judge.registry import problem_hooks
    from attnkit.run.hooks import importing

    with importing(problem_hooks(problem)):  # as the process that runs them sets up (a kernel: interpreted)
        results = quick_checks(problem, reference(problem))
    assert results and all(why is None for _, why in results), results
