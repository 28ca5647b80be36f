"""Real nbgrader on a fresh course made by `attnkit course init` (the commands instructors run)."""
from __future__ import annotations

import csv
import re
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from conftest import make_impl, needs_bwrap
from attnkit import ROOT
from attnkit.grading import grade
from attnkit.diagnose.mistakes import wrong_source
from attnkit.integrations.notebooks import cell_source
from attnkit.problems import all_problems, get

# nbgrader's attnkit step grades students' code, which needs bubblewrap; real nbgrader on a real course takes
# minutes (`pytest tests -m slow`)
pytestmark = [needs_bwrap, pytest.mark.slow]

PROBLEMS = all_problems()
WRONG = ("masked_softmax", "fill_zero")  # carol's one wrong problem
PARTIAL = ("masked_softmax", "additive_attention")  # what bob (untouched release) and carol hand in
# what alice hands in, all right: one notebook of each kind (NumPy, a function and a module importing another, a
# tuple of tensors with no weights, a module with a cache importing rope); executing all thirteen costs minutes
ALICE = PARTIAL + ("numpy_additive_attention", "flash_attention", "causal_self_attention")
HIDDEN_CODE = ["def check_", "valid_mask(", "mismatch(", "_compare_all", "group_base", "as_reference("]


def nbgrader(course: Path, *args, check: bool = True, env: dict | None = None):
    """nbgrader as an instructor runs it: in the environment's bin/ (it calls `alembic` from PATH)."""
    env = dict(env or os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    r = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                       timeout=900, env=env)
    assert r.returncode == 0 or not check, r.stdout[-3000:] + r.stderr[-3000:]
    return r


LOGS: dict = {}  # what the course's nbgrader commands printed


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
    LOGS["autograde"] = nbgrader(root, "autograde", "attention")
    # dave's masked_softmax loops forever: his notebook alone, timed
    hang = submitted / "dave" / "attention"
    hang.mkdir(parents=True)
    nb = nbformat.read(root / "release" / "attention" / "masked_softmax.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.source.startswith("# attnkit: masked_softmax "):
            cell.source = (cell.source.splitlines()[0] + "\ndef masked_softmax(scores, valid_lens=None):\n"
                           "    while True:\n        pass\n")
    nbformat.write(nb, hang / "masked_softmax.ipynb")
    start = time.monotonic()
    LOGS["hang"] = nbgrader(root, "autograde", "attention", "--student", "dave")
    LOGS["hang_seconds"] = time.monotonic() - start
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


def test_a_writable_install_is_warned_about(course):
    """The autograde output says where attnkit's install is writable by the kernel's user (here nbgrader's own): in
    these tests an editable install in a checkout that user owns, or root."""
    from attnkit.integrations import integrity

    log = LOGS["autograde"].stdout + LOGS["autograde"].stderr
    found = integrity.writable(integrity.install_paths(integrity.Snapshot({}, integrity.roots())))
    assert ("attnkit's install is writable by" in log) == bool(found), log[-3000:]
    if found:
        import pwd

        assert f"attnkit: WARNING: attnkit's install is writable by {pwd.getpwuid(os.geteuid()).pw_name}," in log


def test_autograde_warns_of_no_checksum(course):
    """One graded cell per problem with nothing hidden in it: nbgrader's checksum of each locked cell is the release's,
    so autograde prints none of its "checksum has changed" warnings (nbgrader issue #1961), for three students."""
    log = LOGS["autograde"].stdout + LOGS["autograde"].stderr
    assert "Attribute 'checksum'" not in log and "has changed" not in log, log[-3000:]


def test_a_hanging_notebook_is_stopped_by_the_time_per_problem_not_the_cell_timeout(course):
    """dave's masked_softmax never returns: the quick check in the kernel stops at the grader's 30 s (its own message,
    not nbclient's cell timeout of 120 s, which would fail the whole notebook's execution), and the grading outside it
    times out the problem, so his notebook is graded: 0 points, the reason in his feedback. (How long that takes is
    measured, not asserted: `LOGS["hang_seconds"]`; CI's slower machine took 116 s for all of autograde.)"""
    from attnkit.integrations.course import CELL_TIMEOUT

    log = LOGS["hang"].stdout + LOGS["hang"].stderr
    feedback = (course / "feedback" / "dave" / "attention" / "masked_softmax.html").read_text()
    assert "quick check stopped after 30 s" in feedback and "timed out" in feedback
    for text in (log, feedback):
        assert "A cell timed out while it was being executed" not in text, text[-3000:]
        assert f"after {CELL_TIMEOUT} seconds" not in text
    assert notebook_scores(course, "dave", ["masked_softmax"]) == {"masked_softmax": 0}


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
    assert 0 < notebook_scores(course, "carol", PARTIAL)[pid] == report.problems[0].score  # partial credit
    assert notebook_scores(course, "alice", ALICE) == {pid: cpu_points(get(pid)) for pid in ALICE}


def test_feedback_shows_names_and_messages_but_no_hidden_code(course):
    pages = sorted((course / "feedback").rglob("*.html"))
    assert len(pages) == len(ALICE) + 2 * len(PARTIAL) + 2  # alice: hers; bob, carol: two; mallory, dave: one
    carol = (course / "feedback" / "carol" / "attention" / f"{WRONG[0]}.html").read_text()
    assert "masked_softmax::weight_sums failed" in carol and "Recognised mistake [fill_zero]" in carol
    for page in pages:
        text = page.read_text()
        for needle in HIDDEN_CODE:
            assert needle not in text, (page, needle)


# What a student's cell appends to attnkit's grading module: every check passes.
PASS_ALL = ("\n\ndef _run_check(check, ctx, points):\n"
            "    return CheckResult(check.id, check.title, 'passed', points, points)\n")
ZEROS = "import torch\n\ndef masked_softmax(scores, valid_lens=None):\n    return torch.zeros_like(scores)\n"
# grading.py: attnkit's step used to import it only once it graded, after the student's cells had run
REWRITE = ("import pathlib, attnkit\n"
           "grading = pathlib.Path(attnkit.__file__).parent / 'grading.py'\n"
           f"grading.write_text(grading.read_text() + {PASS_ALL!r})\n")
PLANT_BYTECODE = ("import importlib.util, importlib._bootstrap_external as ext, pathlib, attnkit\n"
                  "grading = pathlib.Path(attnkit.__file__).parent / 'grading.py'\n"
                  "st = grading.stat()  # a cache whose header matches the untouched source: Python would trust it\n"
                  f"code = compile(grading.read_text() + {PASS_ALL!r}, str(grading), 'exec')\n"
                  "cached = pathlib.Path(importlib.util.cache_from_source(str(grading)))\n"
                  "cached.parent.mkdir(exist_ok=True)\n"
                  "cached.write_bytes(ext._code_to_timestamp_pyc(code, st.st_mtime, st.st_size))\n")


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """A throwaway install of attnkit (a copy of the package, the reference solutions inside it as in a wheel),
    first on PYTHONPATH for nbgrader and its kernels, writable like an editable install or a venv the grading user
    owns. Two students' cells attack it from the kernel: eve plants a bytecode cache of grading.py whose checks all
    pass, mallory rewrites grading.py itself; both hand in a masked_softmax returning zeros. The checkout is
    never touched: only the copy is."""
    base = tmp_path_factory.mktemp("attack")
    site, root = base / "site", base / "course"
    junk = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "grader", site / "attnkit", ignore=junk)
    shutil.copytree(ROOT / "solutions", site / "attnkit" / "solutions", ignore=junk)
    env = dict(os.environ, PYTHONPATH=str(site))
    r = subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", "course", "init", str(root)], cwd=base,
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    nbgrader(root, "generate_assignment", "attention", env=env)
    for student, attack in (("eve", PLANT_BYTECODE), ("mallory", REWRITE)):
        nb = nbformat.read(root / "source" / "attention" / "masked_softmax.ipynb", as_version=4)
        at = next(i for i, c in enumerate(nb.cells) if c.source.startswith("# attnkit: masked_softmax "))
        nb.cells[at].source = nb.cells[at].source.splitlines()[0] + "\n" + ZEROS
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(attack))  # a cell of her own, run by the kernel only
        (root / "submitted" / student / "attention").mkdir(parents=True)
        nbformat.write(nb, root / "submitted" / student / "attention" / "masked_softmax.ipynb")
    before = {p: p.read_bytes() for p in sorted((ROOT / "grader").rglob("*.py"))}
    autograde = nbgrader(root, "autograde", "attention", check=False, env=env)
    assert before == {p: p.read_bytes() for p in sorted((ROOT / "grader").rglob("*.py"))}, "the checkout changed"
    assert PASS_ALL in (site / "attnkit" / "grading.py").read_text(), "mallory's cell did not run: no attack to test"
    return root, site, autograde


def test_a_student_cell_rewriting_the_installed_grader_is_refused(attacked, tmp_path):
    """The grading module was rewritten on disk by mallory's cell, after nbgrader had started: attnkit's step graded
    with the code it loaded before any student cell ran, saw the change, and refused her notebook with an
    autograder error naming the file; her zeros get no points."""
    root, site, autograde = attacked
    log = autograde.stdout + autograde.stderr
    assert autograde.returncode != 0, log[-3000:]
    assert "changed since nbgrader started" in log, log[-3000:]
    assert f"{site / 'attnkit' / 'grading.py'} (changed)" in log, log[-3000:]
    assert "for student 'mallory'" in log and "for student 'eve'" not in log  # eve's notebook was graded
    assert notebook_scores(root, "mallory", ["masked_softmax"]) == {"masked_softmax": 0}
    assert not (root / "autograded" / "mallory" / "attention" / "masked_softmax.ipynb").exists()


def test_a_planted_bytecode_cache_is_never_run(attacked, tmp_path):
    """eve's cache of grading.py (a header matching the source, so Python would load it) is never read by attnkit's
    step: her zeros get exactly what attnkit gives them, no check passes that zeros fail."""
    root, site, autograde = attacked
    cached = site / "attnkit" / "__pycache__" / f"grading.{sys.implementation.cache_tag}.pyc"
    assert cached.is_file(), "eve's cell did not run: no attack to test"
    report = grade(make_impl(tmp_path, {"masked_softmax.py": ZEROS}), ["masked_softmax"])
    assert notebook_scores(root, "eve", ["masked_softmax"]) == {"masked_softmax": report.problems[0].score}
    assert report.problems[0].score < cpu_points(get("masked_softmax"))
    nb = nbformat.read(root / "autograded" / "eve" / "attention" / "masked_softmax.ipynb", as_version=4)
    shown = "".join(o.get("text", "") for c in nb.cells if c.source.endswith('graded("masked_softmax")')
                    for o in c.get("outputs", []))  # the graded cell, as attnkit's step rewrote it
    failed = re.findall(r"^masked_softmax::\w+ failed \(", shown, re.M)
    assert len(failed) == sum(c.status == "failed" for c in report.problems[0].checks) > 0
