"""Learner notebooks: generated, free of solutions, and runnable top to bottom with nbclient."""
from __future__ import annotations

import ast

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import SOLUTIONS
from attnkit import ROOT
from attnkit.integrations.notebooks import build, cell_source
from attnkit.problems import all_problems

PROBLEMS = all_problems()
# Executing a notebook costs a kernel's start-up (~5 s): one of each kind runs top to bottom, the generation of every
# one is checked below. NumPy; a function with weights; a module importing masked_softmax; a tuple of tensors with no
# weights (no heatmap); a module with a cache importing rope; a module of two methods (step, forward) and a tuple state.
KINDS = ("numpy_additive_attention", "masked_softmax", "additive_attention", "flash_attention", "causal_self_attention",
         "attentional_decoder")


def solution_lines(pid: str) -> list[str]:
    """Distinctive statements of the reference bodies (lines that the stub does not contain)."""
    from attnkit.problems import get
    from attnkit.model.stubs import render

    stub = render(get(pid))
    tree = ast.parse((SOLUTIONS / f"{pid}.py").read_text())
    lines = (SOLUTIONS / f"{pid}.py").read_text().splitlines()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if ast.get_docstring(node) else node.body
            out += [lines[s.lineno - 1].strip() for s in body if len(lines[s.lineno - 1].strip()) > 20]
    return [line for line in out if line not in stub]


def outputs_text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") + "".join(out.get("traceback", [])) + str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.id)
def test_committed_learner_notebook_is_generated_and_has_no_solution(problem):
    path = ROOT / "notebooks" / f"{problem.id}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")
    text = path.read_text()
    for line in solution_lines(problem.id) + ["BEGIN SOLUTION", "HIDDEN TESTS"]:
        assert line not in text, line
    kinds = [c.source.split("\n")[0] for c in nb.cells if c.cell_type == "code"]
    assert any(k.startswith(f"# attnkit: {problem.id} ") for k in kinds)
    assert any("quick_check" in c.source for c in nb.cells) and any("grade_here" in c.source for c in nb.cells)
    # a heatmap of the weights exactly where the problem returns weights
    assert any("show_weights" in c.source for c in nb.cells) == (problem.weights_index is not None)


def execute(nb):
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    return nb


@pytest.mark.parametrize("problem", [p for p in PROBLEMS if p.id in KINDS], ids=lambda p: p.id)
@pytest.mark.slow
def test_learner_notebook_runs_top_to_bottom_with_the_reference_filled_in(problem):
    nb = build(problem.id, "learner")
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("# attnkit: "):
            pid = cell.source.split()[2]
            cell.source = cell_source(next(p for p in PROBLEMS if p.id == pid), "plain")
    nb = execute(nb)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    text = outputs_text(nb)
    total = f"{problem.max_points - problem.points.get('cuda', 0) - problem.points.get('cuda_half', 0)}"
    assert f"{problem.id:<44}passed" in text and f"{total}/{total}" in text
    assert "FAIL" not in text and "ok  shapes and weight sums on the fixed example" in text
    weights_cell = next((c for c in nb.cells if "show_weights" in c.source), None)
    assert (weights_cell is None) == (problem.weights_index is None)
    assert weights_cell is None or any("image/png" in o.get("data", {}) for o in weights_cell.outputs)


@pytest.mark.slow
def test_stub_notebook_runs_and_reports_not_started():
    nb = execute(build("masked_softmax", "learner"))
    text = outputs_text(nb)
    assert "not started" in text and "masked_softmax.py raises NotImplementedError" in text
    assert "def check_" not in text and "grader/judge/checks.py" not in text  # no hidden code in tracebacks


def test_a_hanging_quick_check_stops_at_the_time_per_problem():
    """The quick check runs the learner's code in their kernel (and in nbgrader's autograde): an endless loop is
    stopped at the grader's time per problem (here 1 s), not left to the notebook's cell timeout, even where the
    learner's code, or quick_checks around it, catches every Exception."""
    import time

    from attnkit.integrations.quick import QuickCheckTimeout, bounded_quick_checks

    def masked_softmax(scores, mask=None, dim=-1):
        while True:
            try:
                time.sleep(0.01)
            except Exception:  # noqa: BLE001 - a learner's loop that swallows errors
                pass

    start = time.monotonic()
    with pytest.raises(QuickCheckTimeout, match="quick check stopped after 1 s"):
        bounded_quick_checks(next(p for p in PROBLEMS if p.id == "masked_softmax"), masked_softmax, seconds=1)
    assert time.monotonic() - start < 5
    import signal

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # the timer is put back


def test_the_course_grades_each_problem_in_one_cell_with_nothing_hidden():
    """One graded cell per problem, worth its CPU checks' points, with no hidden-tests region: nbgrader records a
    hidden region's checksum before stripping it and then warns once per cell and student (nbgrader issue #1961)."""
    from attnkit.integrations.notebooks import build
    from attnkit.judge.checks import CHECKS

    for problem in PROBLEMS:
        nb = build(problem.id, "source", solution="regions")
        graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert len(graded) == 1 and graded[0].source.endswith(f'graded("{problem.id}")'), problem.id
        meta = graded[0].metadata["nbgrader"]
        assert meta["points"] == sum(v for c, v in problem.points.items() if not CHECKS[c].needs_cuda)
        assert meta["locked"] and "HIDDEN TESTS" not in nbformat.writes(nb)
