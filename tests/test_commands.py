"""The user's commands, run as a user runs them: pytest at the root, attnkit grade, bad input."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import json
import os
import re
import shutil
import subprocess
import sys

import jsonschema
import pytest

from conftest import GRADED, snapshot
from attnkit.problems import ORDER
from attnkit import ROOT

SCHEMA = json.loads((ROOT / "grader" / "report.schema.json").read_text())


def run(*args, cwd=ROOT):
    if args[:2] == ("-m", "pytest"):  # pytest's cache goes to the rootdir it finds, which a temporary path can put
        args = (*args[:2], "-p", "no:cacheprovider", *args[2:])  # in /tmp itself (a checkout under /tmp, as CI's)
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def attnkit(*args, cwd=ROOT):
    return run("-m", "attnkit.fronts.cli", *args, cwd=cwd)


def test_attnkit_grade_solutions_full_marks_and_json(tmp_path):
    out = tmp_path / "report.json"
    r = attnkit("grade", "--impl", "solutions", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(out.read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["score"] == report["max_score"] > 0
    assert [p["id"] for p in report["problems"]] == list(GRADED)
    assert "total" in r.stdout and f"{report['score']:g}/{report['max_score']:g}" in r.stdout


def test_attnkit_grade_stubs_exits_nonzero_not_started(tmp_path):
    out = tmp_path / "r.json"
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for f in (ROOT / "exercises").glob("*.py"):
        (stubs / f.name).write_text(f.read_text())
    before = snapshot(stubs)
    r = attnkit("grade", "--impl", str(stubs), "--json", str(out))
    assert r.returncode == 1
    report = json.loads(out.read_text())
    jsonschema.validate(report, SCHEMA)
    assert {p["status"] for p in report["problems"]} == {"not_started"}
    assert "not started" in r.stdout
    assert snapshot(stubs) == before


def test_pytest_at_root_grades_and_writes_the_same_json(tmp_path):
    out = tmp_path / "r.json"
    r = run("-m", "pytest", "--attnkit-impl", "solutions", "--attnkit-json", str(out), "-q")
    assert r.returncode == 0, r.stdout[-3000:]
    assert "attnkit score" in r.stdout and "total" in r.stdout
    report = json.loads(out.read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["score"] == report["max_score"]


def test_pytest_k_grades_exactly_one_problem(tmp_path):
    out = tmp_path / "r.json"
    r = run("-m", "pytest", "--attnkit-impl", "solutions", "-k", "additive", "--attnkit-json", str(out), "-q")
    assert r.returncode == 0, r.stdout[-3000:]
    assert [p["id"] for p in json.loads(out.read_text())["problems"]] == ["additive_attention"]


def test_pytest_shows_check_messages_not_tracebacks(tmp_path):
    impl = tmp_path / "impl"
    impl.mkdir()
    (impl / "masked_softmax.py").write_text("import torch\n\ndef masked_softmax(scores, valid_lens=None):\n"
                                            "    return torch.softmax(scores, dim=1)\n")
    r = run("-m", "pytest", "--attnkit-impl", str(impl), "-k", "masked_softmax", "-q")
    assert r.returncode == 1
    assert "called masked_softmax(scores=<float64" in r.stdout and "max error" in r.stdout
    assert "Traceback" not in r.stdout and "raise CheckFailed" not in r.stdout


@pytest.mark.parametrize("args,expected", [
    (["--impl", "no/such/dir"], "impl no/such/dir: no such file or directory"),  # --attnkit-impl for pytest
    (["--impl", "README.md"], "not a directory"),
    (["--impl", "tests"], "none of the problem files is there"),
    (["--impl", "solutions", "--json", "/no/such/dir/r.json"], "does not exist"),
    (["--impl", "solutions", "--json", "/proc/attnkit.json"], "not writable"),
    (["--impl", "solutions", "--json", "grader"], "is a directory"),
])
def test_bad_input_gets_one_line_and_nonzero_exit(args, expected):
    with ThreadPoolExecutor(2) as both:  # two start-ups of Python and torch: side by side
        cli = both.submit(attnkit, "grade", *args)
        plugin = both.submit(run, "-m", "pytest", *[a.replace("--", "--attnkit-") if a.startswith("--") else a for a in args], "-q")
    cli, plugin = cli.result(), plugin.result()
    for r in (cli, plugin):
        text = r.stdout + r.stderr
        assert r.returncode != 0 and expected in text, text
        assert "Traceback" not in text
    lines = [ln for ln in cli.stdout.splitlines() + cli.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("attnkit: error:")


def test_unknown_subcommand_is_one_line():
    r = attnkit("fly")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_command_whose_reader_is_gone_ends_in_one_quiet_exit():
    """`attnkit list | head -1`: the pipe closes before the command has written; it stops there, exit 1, no traceback."""
    read, write = os.pipe()
    os.close(read)  # every write now fails (EPIPE), as once head has exited
    r = subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", "list"], cwd=ROOT, stdout=write,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    os.close(write)
    assert r.returncode == 1 and r.stderr == "", r.stderr


def test_the_command_runs_every_exit_handler_and_keeps_its_exit_code(tmp_path):
    """The console script skips Python's own teardown (cli.entry) but nothing a caller registered: an exit handler
    runs, a temporary folder's finalizer removes it, and the exit code is main()'s."""
    marker = tmp_path / "handler ran"
    code = (f"import atexit, pathlib, sys, tempfile; atexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes'); "
            f"scratch = tempfile.TemporaryDirectory(dir={str(tmp_path)!r}); sys.argv = ['attnkit', 'grade', '--impl', {str(tmp_path / 'missing')!r}]; "
            "from attnkit.fronts.cli import entry; entry()")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "no such file or directory" in r.stderr, r.stderr
    assert marker.read_text() == "yes"
    assert [p.name for p in tmp_path.iterdir()] == [marker.name]  # the TemporaryDirectory's finalizer ran


def test_a_temporary_directory_too_deep_for_a_socket_still_grades(tmp_path):
    """A TMPDIR of 90 characters and more (a CI workspace, a project's own folder): multiprocessing's socket for the
    workers' server would not fit in AF_UNIX's 107 bytes under it ("AF_UNIX path too long", a traceback and no
    grading); its folder is made under /tmp instead and removed at exit, and nothing is left in TMPDIR."""
    deep = tmp_path / ("d" * (100 - len(str(tmp_path))) if len(str(tmp_path)) < 90 else "d")
    deep.mkdir()
    assert len(str(deep)) >= 90
    r = subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", "grade", "--impl", "solutions", "--problems",
                        "masked_softmax"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TMPDIR=str(deep), ATTNKIT_SANDBOX="off"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert list(deep.iterdir()) == []


def test_kit_tests_do_not_grade(tmp_path):
    """`pytest tests/...` runs the kit's own tests only; no grading items appear."""
    r = run("-m", "pytest", "tests/test_tolerances.py", "--collect-only", "-q")
    assert "attnkit::" not in r.stdout


def test_first_contact_on_untouched_stubs_is_short(tmp_path):
    """`pytest` on the stubs: one line per problem not started, the table, what to do next; at most 14 lines besides
    the table's row per problem and pytest's progress lines, and the run fails. `-v` shows every check."""
    ORDER = GRADED  # noqa: N806 - the problems a full grading grades here

    shutil.copytree(ROOT / "exercises", tmp_path / "exercises")
    r = run("-m", "pytest", "--attnkit-impl", str(tmp_path / "exercises"), cwd=tmp_path)
    lines = r.stdout.splitlines()
    progress = [ln for ln in lines if re.search(r"\[\s*\d+%\]$", ln)]  # pytest's own, one line per ~70 tests
    assert r.returncode == 1 and len(lines) - len(progress) <= 14 + len(ORDER), r.stdout
    assert "still a stub" not in r.stdout and "FAILURES" not in r.stdout
    for pid in ORDER:
        assert len([ln for ln in lines if ln.startswith(pid) and "not started" in ln]) == 1, (pid, r.stdout)
    assert any(ln.startswith(f"Next: fill in {ORDER[0]}.py") for ln in lines), r.stdout
    verbose = run("-m", "pytest", "--attnkit-impl", str(tmp_path / "exercises"), "-v", cwd=tmp_path)
    assert verbose.returncode == 1 and verbose.stdout.count("still a stub") >= len(ORDER)


TORCH_AFTER = ("import sys; from attnkit.fronts.cli import main; rc = main(sys.argv[1:]); "
               "print('torch loaded' if 'torch' in sys.modules else 'no torch', rc)")
"""The command line run in-process, then whether torch was loaded, and the exit code."""


@pytest.mark.parametrize("args,expected", [
    (["--impl", "no/such/dir"], "no such file or directory"),
    (["--impl", "tests"], "none of the problem files is there"),
    (["--impl", "solutions", "--json", "/no/such/dir/r.json"], "does not exist"),
    (["--impl", "README.md.zip"], "no such file or directory"),
])
def test_a_wrong_path_is_said_before_torch_loads(tmp_path, args, expected):
    """grade's paths are checked before the sandbox and torch start (fronts/requests.precheck)."""
    r = run("-c", TORCH_AFTER, "grade", *args)
    assert r.stdout.split() == ["no", "torch", "2"], r.stdout + r.stderr
    assert expected in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("make,expected", [
    (lambda d: None, "not a directory of submissions"),
    (lambda d: d.mkdir(), "no submissions in it"),
    (lambda d: (d.mkdir(), (d / "notes.txt").write_text("x")), "skipped 'notes.txt': not a directory or a .zip"),
], ids=["missing", "empty", "only_a_text_file"])
def test_a_batch_folder_without_submissions_is_said_before_torch_loads(tmp_path, make, expected):
    """grade-batch's folder is listed as the batch lists it before anything starts: nothing written to --out."""
    make(tmp_path / "subs")
    r = run("-c", TORCH_AFTER, "grade-batch", str(tmp_path / "subs"), "--out", str(tmp_path / "out"))
    assert r.stdout.split() == ["no", "torch", "2"], r.stdout + r.stderr
    assert expected in r.stderr and "Traceback" not in r.stderr and not (tmp_path / "out").exists()


def test_a_zip_s_damaged_directory_is_said_before_torch_loads(tmp_path):
    archive = tmp_path / "s.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\x00" * 10)  # an end record and nothing else: truncated
    r = run("-c", TORCH_AFTER, "grade", "--impl", str(archive))
    assert r.stdout.split() == ["no", "torch", "2"], r.stdout + r.stderr
    assert "not a valid zip" in r.stderr
