"""Real nbgrader on a fresh course made by `attnkit course init` (the commands instructors run)."""
from __future__ import annotations

import csv
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import make_impl, needs_bwrap
from attnkit import ROOT
from attnkit.grading import grade
from attnkit.diagnose.mistakes import wrong_source
from attnkit.integrations.notebooks import cell_source
from attnkit.problems import all_problems, get

pytestmark = needs_bwrap  # nbgrader's attnkit step grades students' code, which needs bubblewrap

pytestmark = pytest.mark.slow  # real nbgrader on a real course: about a minute (`pytest tests -m slow`)

PROBLEMS = all_problems()
WRONG = ("masked_softmax", "fill_zero")  # carol's one wrong problem
PARTIAL = ("masked_softmax", "additive_attention")  # what bob (untouched release) and carol hand in
# what alice hands in, all right: one notebook of each kind (NumPy, a function and a module importing another, a
# tuple of tensors with no weights, a module with a cache importing rope); executing all thirteen costs minutes
ALICE = PARTIAL + ("numpy_additive_attention", "flash_attention", "causal_self_attention")
HIDDEN_CODE = ["def check_", "valid_mask(", "mismatch(", "_compare_all", "group_base", "as_reference("]


def nbgrader(course: Path, *args):
    """nbgrader as an instructor runs it: in the environment's bin/ (it calls `alembic` from PATH)."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    r = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                       timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course, released, with three submissions autograded and exported."""
    root = tmp_path_factory.mktemp("course") / "attnkit-course"
    r = subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", "course", "init", str(root)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    nbgrader(root, "generate_assignment", "attention")
    submitted = root / "submitted"
    for student, origin in (("alice", "source"), ("bob", "release"), ("carol", "source")):
        shutil.copytree(root / origin / "attention", submitted / student / "attention")
        for extra in (submitted / student / "attention").glob("*.ipynb"):
            if extra.stem not in (ALICE if student == "alice" else PARTIAL):
                extra.unlink()  # bob and carol hand in two notebooks: enough to show each case, at a fraction of the cost
    pid, mid = WRONG
    path = submitted / "carol" / "attention" / f"{pid}.ipynb"
    nb = nbformat.read(path, as_version=4)
    mistake = next(m for m in get(pid).mistakes if m.id == mid)
    for cell in nb.cells:
        if cell.source.startswith(f"# attnkit: {pid} "):
            cell.source = cell_source(get(pid), "plain")
            for old, new in mistake.patch:
                cell.source = cell.source.replace(old, new)
    nbformat.write(nb, path)
    # mallory's masked_softmax returns zeros and replaces the kernel's check() by one that always passes
    cheat = submitted / "mallory" / "attention"
    cheat.mkdir(parents=True)
    nb = nbformat.read(root / "source" / "attention" / "masked_softmax.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.source.startswith("# attnkit: masked_softmax "):
            cell.source = (cell.source.splitlines()[0] + "\nimport torch\nimport attnkit.integrations.notebook as _n\n"
                           "_n.check = lambda *a, **k: None\n\n"
                           "def masked_softmax(scores, valid_lens=None):\n    return torch.zeros_like(scores)\n")
    nbformat.write(nb, cheat / "masked_softmax.ipynb")
    nbgrader(root, "autograde", "attention")
    nbgrader(root, "export")
    nbgrader(root, "generate_feedback", "attention")
    return root


def notebook_scores(course: Path, student: str, pids=None) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {pid: gb.find_submission_notebook(pid, "attention", student).score
                for pid in (pids or [p.id for p in PROBLEMS])}


def cpu_points(problem) -> float:
    return sum(v for k, v in problem.points.items() if not k.startswith("cuda"))


def test_a_student_cell_cannot_grade_itself(course):
    """Replacing check() inside the kernel changes nothing: the points come from a grading outside it."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        score = gb.find_submission_notebook("masked_softmax", "attention", "mallory").score
    assert score < 2, score  # zeros_like can pass only the shape check


def test_release_has_no_solution_and_no_hidden_tests(course):
    from test_notebooks import solution_lines

    for p in PROBLEMS:
        text = (course / "release" / "attention" / f"{p.id}.ipynb").read_text()
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
        assert not re.search(r"(?<!quick_)check\(", text)  # no graded check call: only quick_check stays
        for dep in p.requires + (p.id,):
            for line in solution_lines(dep):
                assert line not in text, (p.id, line)
        assert "YOUR CODE HERE" in text


def test_totals_full_zero_and_one_problem_lost(course):
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert float(rows["alice"]["max_score"]) == sum(cpu_points(p) for p in PROBLEMS)  # every notebook counts
    assert float(rows["alice"]["score"]) == sum(cpu_points(get(pid)) for pid in ALICE)
    assert float(rows["bob"]["score"]) == 0
    carol = notebook_scores(course, "carol", PARTIAL)
    assert carol["additive_attention"] == cpu_points(get("additive_attention"))  # its own masked_softmax cell is right
    assert carol[WRONG[0]] < cpu_points(get(WRONG[0]))
    assert float(rows["carol"]["score"]) == sum(carol.values())


def test_nbgrader_points_equal_attnkit_points_for_the_same_code(course, tmp_path):
    pid, mid = WRONG
    mistake = next(m for m in get(pid).mistakes if m.id == mid)
    report = grade(make_impl(tmp_path, {f"{pid}.py": wrong_source(get(pid), mistake)}), [pid])
    assert notebook_scores(course, "carol", PARTIAL)[pid] == report.problems[0].score
    assert notebook_scores(course, "alice", ALICE) == {pid: cpu_points(get(pid)) for pid in ALICE}


def test_feedback_shows_names_and_messages_but_no_hidden_code(course):
    pages = sorted((course / "feedback").rglob("*.html"))
    assert len(pages) == len(ALICE) + 2 * len(PARTIAL) + 1  # alice: hers; bob, carol: two; mallory: one
    carol = (course / "feedback" / "carol" / "attention" / f"{WRONG[0]}.html").read_text()
    assert "masked_softmax::weight_sums failed" in carol and "Recognised mistake [fill_zero]" in carol
    for page in pages:
        text = page.read_text()
        for needle in HIDDEN_CODE:
            assert needle not in text, (page, needle)
