"""A regular install (the wheel, as `pip install .` and GitHub Classroom make it) grades, is imported as
`attnkit` alone, keeps the references out of the sandbox's view, and changes no other project's pytest.

The wheel is built from a copy of the kit's sources and installed without dependencies into a fresh
virtual environment; torch, numpy and pytest come from this environment's site-packages through a
.pth file (no network needed; that folder's own .pth files, the editable install's among them, are not
processed). Every command runs outside the checkout.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from attnkit import ROOT
from conftest import SOLUTIONS, needs_bwrap


def _run(cmd, cwd, env=None, timeout=300):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the fresh environment's python, its site-packages, a working folder outside the checkout)."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    src.mkdir()
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, src / part)
    for part in ("grader", "solutions"):
        shutil.copytree(ROOT / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    built = _run([sys.executable, "-m", "pip", "wheel", src, "--no-deps", "--no-build-isolation", "-q",
                  "-w", tmp / "dist"], tmp)
    assert built.returncode == 0, built.stderr[-2000:]
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp)
    assert made.returncode == 0, made.stderr[-2000:]
    python = venv / "bin" / "python"
    wheel = next((tmp / "dist").glob("attnkit-*.whl"))
    put = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel], tmp)
    assert put.returncode == 0, put.stderr[-2000:]
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp).stdout.strip())
    (site / "_attnkit_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp / "work"
    work.mkdir()
    shutil.copytree(SOLUTIONS, work / "mine")
    return python, site, work


def test_the_wheel_grades_with_its_own_references(installed):
    python, site, work = installed
    where = _run([python, "-c", "import attnkit, importlib.util; print(attnkit.REFERENCE_DIR); "
                  "print(importlib.util.find_spec('grader'))"], work)
    assert where.stdout.split() == [str(site / "attnkit" / "solutions"), "None"], where.stdout + where.stderr
    graded = _run([python.parent / "attnkit", "grade", "--impl", work / "mine", "--problems", "masked,numpy",
                   "--json", work / "r.json"], work, {"ATTNKIT_SANDBOX": "off"})
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-2000:]
    report = json.loads((work / "r.json").read_text())
    assert report["score"] == report["max_score"] == 24


@needs_bwrap
def test_the_installed_references_are_out_of_the_sandbox_view(installed):
    """The kit lives in site-packages, which the sandbox binds: its package folder, references included, is
    covered by an empty one inside, while the grading works."""
    python, site, work = installed
    sub = work / "sneaky"
    shutil.copytree(SOLUTIONS, sub, dirs_exist_ok=True)
    target = site / "attnkit" / "solutions" / "additive_attention.py"
    (sub / "additive_attention.py").write_text(f"print(open({str(target)!r}).read())\n")
    graded = _run([python.parent / "attnkit", "grade", "--untrusted", "--impl", sub, "--problems", "masked,additive",
                   "--json", work / "s.json"], work)
    report = json.loads((work / "s.json").read_text())
    assert report["sandbox"] == "bubblewrap"
    by_id = {p["id"]: p for p in report["problems"]}
    assert by_id["masked_softmax"]["score"] == by_id["masked_softmax"]["max_score"], graded.stdout[-2000:]
    text = "\n".join(c["message"] for c in by_id["additive_attention"]["checks"])
    assert "FileNotFoundError" in text and "class AdditiveAttention" not in text, text[:2000]


def test_pytest_does_not_rewrite_the_grader(installed):
    """pytest marks every module of a plugin's distribution for assertion rewriting; the plugin unmarks the kit, so a
    grading run compiles none of the grader's modules again (half a second where bytecode is not written)."""
    python, _, work = installed
    code = ("import sys, pytest\n"
            "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--attnkit-impl', sys.argv[1], '--attnkit-problems', 'rope']) "
            "or print('REWRITTEN', sorted(n for n, m in sys.modules.items() if n.startswith('attnkit') "
            "and '@py_builtins' in vars(m))))\n")
    ran = _run([python, "-c", code, work / "mine"], work, {"ATTNKIT_SANDBOX": "off", "PYTHONDONTWRITEBYTECODE": "1"})
    line = next((x for x in ran.stdout.splitlines() if x.startswith("REWRITTEN")), None)
    assert line is not None, ran.stdout[-2000:] + ran.stderr[-2000:]
    rewritten = eval(line.removeprefix("REWRITTEN "))  # noqa: S307 - our own subprocess's list of names
    assert rewritten == ["attnkit", "attnkit.fronts", "attnkit.fronts.plugin"], rewritten  # imported before it runs


def test_other_projects_pytest_is_unchanged(installed):
    """The plugin is installed (its --attnkit- options are listed) and inert: a project whose conftest defines
    --seed, --impl and --json runs as before, and `pytest --json` there does not grade."""
    python, _, work = installed
    other = work / "other"
    other.mkdir()
    (other / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        "    for flag in ('--seed', '--impl', '--json', '--problems'):\n"
        "        parser.addoption(flag, default=None)\n")
    (other / "test_own.py").write_text(
        "def test_own_option(request):\n    assert request.config.getoption('--seed') == '3'\n")
    ran = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--seed", "3", "--json", "x.json"], other)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "attnkit" not in ran.stdout and not (other / "x.json").exists()
    helped = _run([python, "-m", "pytest", "--help", "-p", "no:cacheprovider"], other)
    assert "--attnkit-impl" in helped.stdout
    markers = _run([python, "-m", "pytest", "--markers", "-p", "no:cacheprovider"], other)
    assert "attnkit" not in markers.stdout
    # inert means cheap too: the plugin loads none of the kit's problems, hence no torch, in another project
    probe = ("import sys, pytest; pytest.main(['-q', '-p', 'no:cacheprovider', '--seed', '3']); "
             "print('torch imported' if 'torch' in sys.modules else 'torch not imported')")
    loaded = _run([python, "-c", probe], other)
    assert "1 passed" in loaded.stdout and "torch not imported" in loaded.stdout, loaded.stdout[-2000:]


EXTRAS_ONLY = ("nbformat", "nbgrader", "nbclient", "ipykernel", "IPython", "jupyter_core", "matplotlib", "copydetect",
               "distributed", "dask", "cryptography", "jsonschema", "yaml", "hypothesis", "mutmut", "importlinter")
"""What the extras install (`course`, `plots`, `similarity`, `cluster`, `dev`): never needed to grade."""


def test_a_learner_install_grades_with_torch_numpy_and_pytest_alone(installed, tmp_path):
    """The README's learner command installs the kit with torch, NumPy and pytest only: `pytest` and `attnkit grade`
    grade with every extra's package made unimportable, and a command that needs an extra says which, in one line."""
    python, _, work = installed
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        f"BLOCKED = {EXTRAS_ONLY!r}\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ImportError(f'{name} is an extra: not installed for a learner')\n"
        "sys.meta_path.insert(0, Block())\n")
    # the blocker first; then this environment's package folders as its sys.path has them (the fixture's .pth names
    # the first; a virtual environment layered on another's packages has more)
    packages = [p for p in sys.path if p.endswith("site-packages")]
    env = {"PYTHONPATH": os.pathsep.join([str(blocker), *packages]), "ATTNKIT_SANDBOX": "off"}
    probe = _run([python, "-c", "import nbformat"], work, env)
    assert "is an extra" in probe.stderr  # the blocker is in force
    graded = _run([python.parent / "attnkit", "grade", "--impl", work / "mine", "--problems", "masked",
                   "--json", work / "learner.json"], work, env)
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-2000:]
    ran = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",  # dev's plugin
                "--attnkit-impl", work / "mine",
                "--attnkit-problems", "masked"], work, env)
    assert ran.returncode == 0 and "passed" in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]
    course = _run([python.parent / "attnkit", "course", "init", work / "course"], work, env)
    assert course.returncode == 2 and '.[course]' in course.stderr and "Traceback" not in course.stderr, course.stderr
    readme = (ROOT / "README.md").read_text()
    learner = [line for line in readme.splitlines() if line.startswith("pip install torch==2.13.0 -e . ")]
    assert len(learner) == 2 and all("[" not in line.split("#")[0] for line in learner)  # no extra
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in learner[1]  # the CPU index inside its command
