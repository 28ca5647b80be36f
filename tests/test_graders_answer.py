"""Graders that always answer: the Gradescope runner writes results.json where bubblewrap cannot make its namespaces
(a Docker container with the default seccomp profile), and GitHub Classroom's workflow grades each problem once."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import make_impl, needs_bwrap
from test_hiring_and_scale import GRADESCOPE_SCHEMA, attnkit

import jsonschema

REFUSED = ("bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged "
           "user namespaces. On e.g. debian this can be enabled with 'sysctl kernel.unprivileged_userns_clone=1'.")


def _no_namespaces(tmp_path: Path) -> dict:
    """The environment of a machine where bwrap is installed and refused its namespaces: a `bwrap` first on PATH that
    fails as the real one does there (its message, exit 1), whatever it is asked."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text(f"#!/bin/sh\necho {REFUSED!r} >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "ATTNKIT_SANDBOX": "auto"}


def _autograder(tmp_path: Path, *flags: str) -> Path:
    """Build the autograder with `flags`, unpack its copy of the kit, and return the folder of run_autograder."""
    assert attnkit("gradescope", "build", str(tmp_path / "autograder.zip"), *flags).returncode == 0
    with zipfile.ZipFile(tmp_path / "autograder.zip") as z:
        z.extractall(tmp_path / "source")
    return tmp_path / "source"


def _run(source: Path, root: Path, env: dict):
    """The autograder's run_autograder, as Gradescope runs it, with this interpreter."""
    return subprocess.run(["bash", str(source / "run_autograder")], env={**env, "AUTOGRADER_ROOT": str(root),
                          "PYTHON": sys.executable}, capture_output=True, text=True, timeout=600, cwd=root.parent)


@pytest.fixture
def refused(tmp_path, monkeypatch):
    """This process sees the machine of _no_namespaces (jail.unusable's answer is cached: cleared before and after)."""
    from attnkit.run import jail

    monkeypatch.setenv("PATH", _no_namespaces(tmp_path)["PATH"])
    jail.unusable.cache_clear()
    yield
    jail.unusable.cache_clear()


@pytest.mark.slow  # end to end, seconds each: `pytest tests -m slow`
def test_without_namespaces_the_runner_grades_in_the_process_sandbox_and_says_so(tmp_path):
    """bwrap installed, namespaces refused: results.json is written (before: exit 2 and no file), graded in the
    process sandbox, and the isolation is recorded for the instructor (extra_data, a hidden test, stdout) while the
    student's own texts do not mention it."""
    root = tmp_path / "autograder"
    make_impl(root / "submission", {"additive_attention.py": "raise ImportError('nope')\n"})
    r = _run(_autograder(tmp_path), root, _no_namespaces(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    data = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(data, GRADESCOPE_SCHEMA)
    assert data["extra_data"]["attnkit"]["sandbox"] == "process"
    assert "No permissions to creating new namespace" in data["extra_data"]["attnkit"]["bubblewrap_unusable"]
    hidden = [t for t in data["tests"] if t["visibility"] == "hidden"]
    assert [t["name"] for t in hidden] == ["grading isolation (instructors only)"] and hidden[0]["max_score"] == 0
    graded = [t for t in data["tests"] if t["visibility"] != "hidden"]
    assert sum(t["score"] for t in graded) == data["score"] > 0  # the correct problems got their points
    assert any(t["name"].startswith("additive_attention") and t["score"] == 0 for t in graded)
    assert "process sandbox" in r.stdout and "bwrap is installed, but" in r.stdout  # stdout: the instructor's
    assert "install bubblewrap" not in r.stdout + r.stderr  # it is installed: the advice is about namespaces
    assert "sandbox" not in data["output"]


def test_an_autograder_built_for_bubblewrap_only_answers_with_an_error(tmp_path, refused, monkeypatch, capsys):
    """--sandbox bwrap: no grading outside bubblewrap, and still a results.json, with a clear autograder error."""
    from attnkit.integrations import gradescope, gradescope_run

    source = _autograder(tmp_path, "--sandbox", "bwrap")
    assert json.loads((source / "attnkit" / "gradescope.json").read_text()) == {"sandbox": "bwrap"}
    monkeypatch.setattr(gradescope, "ROOT", source / "attnkit")  # the autograder's copy of the kit, with its settings
    root = tmp_path / "autograder"
    make_impl(root / "submission")
    assert gradescope_run.run(root) == 0
    data = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(data, GRADESCOPE_SCHEMA)
    assert data["score"] == 0 and data["tests"] == [] and "could not grade your submission" in data["output"]
    assert data["extra_data"]["attnkit"]["sandbox"] is None and "--sandbox bwrap" in capsys.readouterr().out


def test_a_grader_failure_still_writes_results(tmp_path, monkeypatch):
    """Whatever the grader raises, the student gets an autograder error in results.json, the instructor its cause."""
    from attnkit import grading
    from attnkit.integrations import gradescope, gradescope_run

    def broken(*args, **kwargs):
        raise RuntimeError("a bug of the grader's")

    monkeypatch.setattr(grading, "grade", broken)
    monkeypatch.setattr(gradescope, "ROOT", tmp_path)  # no settings: --sandbox auto
    make_impl(tmp_path / "submission")
    assert gradescope_run.run(tmp_path) == 0
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data["score"] == 0 and "the grader itself, not your code" in data["output"]


def test_the_refusal_names_the_real_remedy():
    """Where bwrap is installed but refused its namespaces, the advice is to allow them, not to install it."""
    from attnkit.run.jail import INSTALL, NOT_INSTALLED, remedy

    assert remedy(NOT_INSTALLED) == INSTALL
    assert "install bubblewrap" not in remedy("bwrap cannot make namespaces here (setting up uid map: Permission "
                                              "denied)") and "namespaces" in remedy("x")


@needs_bwrap
@pytest.mark.slow  # end to end, seconds each: `pytest tests -m slow`
def test_where_bubblewrap_works_the_record_says_so(tmp_path):
    root = tmp_path / "autograder"
    make_impl(root / "submission")
    r = _run(_autograder(tmp_path), root, {**os.environ})
    data = json.loads((root / "results" / "results.json").read_text())
    record = data["extra_data"]["attnkit"]
    assert r.returncode == 0 and record["sandbox"] == "bubblewrap" and record["bubblewrap_unusable"] is None
    assert all(t["visibility"] != "hidden" for t in data["tests"]) and data["score"] > 0


# GitHub Classroom ----------------------------------------------------------------------------------------------------

def test_classroom_template_holds_the_stubs_and_one_step_per_problem(tmp_path):
    """init writes every stub (keeping a file already there) and a workflow with one grading step per problem, whose
    ids are the reporter's runner names and environment variables by its own rules."""
    import yaml

    from attnkit.integrations.classroom import cpu_points
    from attnkit.model.stubs import render
    from attnkit.problems import all_problems

    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "rope.py").write_text("# mine\n")
    r = attnkit("classroom", "init", str(tmp_path), "--kit", "git+https://example.org/attnkit.git")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "exercises" / "rope.py").read_text() == "# mine\n"  # kept
    for p in all_problems():
        if p.id != "rope":
            assert (tmp_path / "exercises" / f"{p.id}.py").read_text() == render(p)
    wf = yaml.safe_load((tmp_path / ".github" / "workflows" / "classroom.yml").read_text())
    steps = wf["jobs"]["grade"]["steps"]
    graded = [s for s in steps if "attnkit classroom grade" in s.get("run", "")]
    assert [s["name"] for s in graded] == [p.id for p in all_problems()]  # one grading per problem, not per check
    assert all(s["run"] == f"attnkit classroom grade {s['name']} --impl exercises" for s in graded)
    assert "git+https://example.org/attnkit.git" in steps[2]["run"]
    reporter = steps[-1]
    runners = reporter["with"]["runners"].split(",")
    assert runners == [s["id"] for s in graded] and all(r.isalnum() for r in runners)  # the reporter's pattern
    for runner in runners:  # the reporter reads process.env[`${runner.trim().toUpperCase()}_RESULTS`]
        assert reporter["env"][f"{runner.upper()}_RESULTS"] == f"${{{{steps.{runner}.outputs.result}}}}"
    assert sum(cpu_points(p) for p in all_problems()) > 0
    again = attnkit("classroom", "init", str(tmp_path))
    assert again.returncode == 2 and "nothing is overwritten" in again.stderr


def test_a_classroom_step_grades_its_problem_once_and_its_result_is_the_table(tmp_path):
    """The step prints the problem's table and hands the reporter a result whose points are the table's: one test
    per check with its points (the reporter's total sums them), the problem's CPU points as the maximum."""
    import base64

    from attnkit.diagnose.mistakes import wrong_source
    from attnkit.integrations.classroom import cpu_points
    from attnkit.problems import get

    p = get("masked_softmax")
    impl = make_impl(tmp_path / "exercises", {"masked_softmax.py": wrong_source(p, p.mistakes[0])})
    output = tmp_path / "github_output"
    r = attnkit("classroom", "grade", "masked", "--impl", str(impl), env={**os.environ, "GITHUB_OUTPUT": str(output)})
    assert r.returncode == 0, r.stderr[-2000:]
    key, value = output.read_text().strip().split("=", 1)
    data = json.loads(base64.b64decode(value))
    assert key == "result" and data["version"] == 1 and data["max_score"] == cpu_points(p)
    score = sum(t["score"] for t in data["tests"])
    assert 0 < score < data["max_score"] and data["status"] == "fail"
    assert {t["status"] for t in data["tests"]} == {"pass", "fail"}
    table_line = next(line for line in r.stdout.splitlines() if line.startswith("masked_softmax "))
    assert table_line.split()[-1] == f"{score:g}/{data['max_score']:g}"  # the table says what the result says
    assert f"masked_softmax: {score:g}/{data['max_score']:g} points" in r.stdout
    assert "passed" not in r.stdout.splitlines()[-1]  # no pytest line above it any more


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("bwrap") is None,
                    reason="needs root, setpriv (util-linux) and bwrap: a container's root is simulated by dropping "
                    "CAP_SYS_ADMIN")
def test_root_without_the_right_to_mount_grades_in_the_process_sandbox(tmp_path):
    """Root in a Docker container with the default capabilities: the real bwrap cannot make its namespaces, nor can the
    process sandbox make private mounts. The runner still grades (the uid drop holds) and says how it was isolated."""
    from attnkit import REFERENCE_DIR

    root = tmp_path / "autograder"
    stolen = (f"import importlib.util\n"  # the reference itself, by its path: the kit's files are in view here
              f"spec = importlib.util.spec_from_file_location('ref', {str(REFERENCE_DIR / 'scaled_dot_product_attention.py')!r})\n"
              f"ref = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(ref)\n"
              f"scaled_dot_product_attention = ref.scaled_dot_product_attention\n")
    make_impl(root / "submission", {"additive_attention.py": "raise ImportError('nope')\n",
                                    "scaled_dot_product_attention.py": stolen})
    mode = REFERENCE_DIR.stat().st_mode
    source = _autograder(tmp_path)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHON": sys.executable}
    r = subprocess.run(["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "bash",
                        str(source / "run_autograder")], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    data = json.loads((root / "results" / "results.json").read_text())
    record = data["extra_data"]["attnkit"]
    assert record["sandbox"] == "process" and "without the right to mount" in record["isolation"], record
    masked = [t for t in data["tests"] if t["name"].startswith("masked_softmax")]
    assert masked and all(t["score"] == t["max_score"] for t in masked)  # graded, not "could not prepare"
    assert "without the right to mount" in r.stdout
    stolen_tests = [t for t in data["tests"] if t["name"].startswith("scaled_dot_product_attention")]
    assert stolen_tests and all(t["score"] == 0 for t in stolen_tests), "the reference was readable by the submission"
    assert REFERENCE_DIR.stat().st_mode == mode  # given its mode back
