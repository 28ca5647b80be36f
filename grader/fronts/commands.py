"""What `attnkit grade`, `grade-batch`, `cluster`, `export`, `gradescope`, `classroom`, `course` and `dev` do
(the learner's commands are in learner.py and watch.py; the parser is cli.py)."""
from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path

from .options import BadInput, default_impl
from .scoped import report_argv, report_extras, scoped
from .requests import (BatchRequest, ClassReportRequest, ClassroomRequest, ClusterRequest, CourseRequest, DevAction,
                       DevRequest, ExportRequest, GradeRequest, GradescopeAction, GradescopeRequest, Sandbox,
                       SimilarityRequest, need_matplotlib)


def _validate_specs(lang) -> None:
    """A broken spec: one clear line (exit 3), before any grading. Imports torch, so it follows the cheap checks."""
    from ..judge.checks import validate_checks
    from ..problems import all_problems

    for problem in all_problems(lang):
        validate_checks(problem)


def cmd_grade(request: GradeRequest) -> int:
    from ..report.summary import failures, table
    from ..report.term import fancy
    from ..run.submission import open_submission

    impl, unpacked = open_submission(request.impl if request.impl is not None else default_impl())  # before torch
    out, md, junit = request.json, request.report, request.junit
    try:
        plots = _plots_dir(request.plots) if request.plots else None
        _validate_specs(request.lang)
        request, scope = scoped(request, impl)
        report = _grade_in_pytest(request, impl, junit) if junit else _grade_here(request, impl)
        extras = report_extras(impl, report, scope) if md else None  # read before a zip's folder is removed
    finally:
        if unpacked:
            unpacked.cleanup()
    report.variant = request.variant
    if out:
        from ..report.summary import write_json

        write_json(report, out)
    print(table(report, colour=fancy()))
    details = failures(report)
    if details:
        print("\nWhat to fix:\n" + details)
    if out:
        print(f"\nJSON report: {out}")
    if md:
        from ..report.interview import write

        write(report, md, str(request.impl), report_argv(request), extras)
        print(f"interviewer's report: {md}")
    if plots:
        from ..report.plots import write_plots

        for path in write_plots(report, plots):
            print(f"plot: {path}")
    return exit_code(report)


def _grade_here(request: GradeRequest, impl):
    """The grading core, called directly: what the pytest plugin runs, without pytest's start-up."""
    import gc

    gc.freeze()  # torch and the specs stay loaded for good: no collection walks them again (a tenth of a second each)
    from ..grading import grade
    from ..run.jail import decide

    report = grade(impl, list(request.problems) if request.problems else None, seed=request.seed,
                   timeout=request.timeout, limits=request.limits, sandbox=decide(request.sandbox.wanted),
                   lang=request.lang)
    return report


def _grade_in_pytest(request: GradeRequest, impl, junit):
    """The same grading as pytest items (one per check), for the JUnit XML that pytest writes (--junit)."""
    import pytest

    from .options import limit_args

    seen = {}

    class Capture:
        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session):
            seen["grader"] = session.config.pluginmanager.get_plugin("attnkit-grader")

    # No configuration but ours: an empty ini file and an empty folder to "collect" (never the submission's,
    # whose pytest.ini could name plugins, nor the kit's package, which pytest would import under a second name).
    empty = tempfile.TemporaryDirectory(prefix="attnkit-grade-")
    # Plugins that only cost time here: log capture around each check, and a search for unraisable exceptions
    # that collects garbage five times over every object torch made (a quarter of a second).
    argv = [empty.name, "-c", os.devnull, "--rootdir", empty.name, "-p", "no:terminal", "-p", "no:cacheprovider",
            "-p", "no:logging", "-p", "no:unraisableexception",
            "--noconftest", "--attnkit-only", "--attnkit-impl", str(impl),
            "--attnkit-seed", str(request.seed),
            "--attnkit-timeout", str(request.timeout),
            f"--junitxml={junit}"]
    if request.problems:
        argv += ["--attnkit-problems", ",".join(request.problems)]
    argv += limit_args(request.limits)
    if request.sandbox is Sandbox.REQUIRED:
        argv += ["--attnkit-untrusted"]
    try:
        pytest.main(argv, plugins=[Capture()])
    finally:
        empty.cleanup()
    report = getattr(seen.get("grader"), "report", None)
    if report is None:
        raise BadInput("grading did not run: is attnkit installed (pip install -e .)? Its pytest plugin is missing")
    return report


GRADER_ERROR_EXIT = 3
"""`attnkit grade` (and `pytest` when grading): 0 full marks, 1 not full marks, 3 the grader failed on some check
(those checks are left out of the maximum; the grade is incomplete), 2 bad input."""


def exit_code(report) -> int:
    if report.grader_errors:
        return GRADER_ERROR_EXIT
    return 0 if report.max_score > 0 and report.score == report.max_score else 1


def _plots_dir(path) -> Path:
    need_matplotlib()
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise BadInput(f"--plots {path}: not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--plots {path}: cannot create it ({exc.strerror})") from None
    return p


def cmd_batch(request: BatchRequest) -> int:
    from ..integrations.batch import run

    rows = run(request.submissions, request.out, workers=request.workers, force=request.force,
               cluster=request.cluster, security=request.security,
               problem_ids=list(request.problems) if request.problems else None, seed=request.seed,
               timeout=request.timeout, limits=request.limits, sandbox=True)
    print(f"{len(rows)} submissions: results in {request.out} (grades.csv)")
    return 0


def cmd_cluster(request: ClusterRequest) -> int:
    """`attnkit cluster certs DIR`: a CA and the scheduler's, workers' and client's certificates; the command lines."""
    from ..integrations.cluster_certs import make, summary

    folder = make(request.directory, days=request.days)
    print(summary(folder, host=request.host, port=request.port))
    return 0


def cmd_gradescope(request: GradescopeRequest) -> int:
    from ..integrations import gradescope, gradescope_run

    if request.action is GradescopeAction.RUN:
        return gradescope_run.run(request.root)
    print(f"wrote {gradescope.build(request.out, request.visibility, request.isolation)}: upload it as the autograder (Configure Autograder, "
          "zip file)")
    return 0


def cmd_class_report(request: ClassReportRequest) -> int:
    from ..report.class_report import write

    out, data = request.out, request.json
    s = write(request.results, out, data)
    print(f"{s['submissions']} submissions, {s['graded']} graded" + "".join(f"; wrote {p}" for p in (out, data) if p))
    return 0


def cmd_similarity(request: SimilarityRequest) -> int:
    from ..integrations.similarity import pairs, source_of

    out = request.json
    found = pairs(source_of(request.path), request.threshold)
    from ..run.inbox import clean

    for f in found:  # submission names are the submitters' file names: no control characters reach the terminal
        per = ", ".join(f"{pid} {s:.0%}" for pid, s in f["problems"].items())
        print(f"{f['similarity']:.0%}  {clean(f['a'], 100)}  {clean(f['b'], 100)}  ({f['tokens']} tokens alike; {per})")
    print(f"{len(found)} pair(s) at or above {request.threshold:.0%} alike (beyond the stubs and the kit's public code)")
    if out:
        from ..files import atomic_write
        import json

        atomic_write(out, json.dumps({"threshold": request.threshold, "pairs": found}, indent=2) + "\n")
    return 0


def cmd_classroom(request: ClassroomRequest) -> int:
    if request.action == "grade":
        from ..integrations.classroom_step import run

        return run(request.directory, request.impl, request.lang)
    from ..integrations.classroom import init

    for path in init(request.directory, request.kit):
        print(f"wrote {path}")
    return 0


def cmd_export(request: ExportRequest) -> int:
    from ..integrations.export import export

    written, record = export(request.directory, list(request.problems), request.variant, request.minutes)
    for path in written:
        print(f"wrote {path}")
    clock = f"; the clock started now: {request.minutes} minutes" if request.minutes else ""
    print(f"kept the interviewer's record (problems, variant, start time) in {record}{clock}")
    print(f"give the candidate {request.directory} (or work in it yourself: `cd {shlex.quote(str(request.directory))}"
          f" && pytest test_public.py`); grade what comes back with `attnkit grade --impl submission.zip --report "
          "report.html` (it grades the bundle's problems and variant on its own)")
    return 0


def cmd_course(request: CourseRequest) -> int:
    from ..integrations.course import ASSIGNMENT, init

    for path in init(request.directory, request.lang):
        print(f"wrote {path}")
    print(f"next: cd {request.directory} && nbgrader generate_assignment {ASSIGNMENT}")
    return 0


def cmd_dev(request: DevRequest) -> int:
    from ..dev.tasks import sync

    if request.action is DevAction.MUTANTS:
        return _mutants(request)
    if request.action is DevAction.SYNC:
        for line in sync() or ["everything generated is fresh"]:
            print(line)
        return 0
    from ..dev.tasks import self_check

    problems = self_check()
    for line in problems:
        print(line)
    print("dev check: ok" if not problems else f"dev check: {len(problems)} problem(s)")
    return 1 if problems else 0


def _mutants(request: DevRequest) -> int:
    """Print `killed K/N non-equivalent mutants` per problem; exit 1 if any mutant survives unlisted."""
    import json
    import time

    from ..defaults import DEFAULT_SEED
    from ..dev.mutants import run
    from ..problems import all_problems, get

    problems = [get(pid) for pid in request.problems] if request.problems else all_problems()
    out = request.json
    start = time.monotonic()
    results = run(problems, DEFAULT_SEED, request.sample, request.seed)
    for pid, r in results.items():
        if r.get("reference_fails"):
            print(f"{pid}: the unmutated reference fails ({r['reference_fails']}): its mutants would prove nothing")
            continue
        live = r["mutants"] - r["equivalent"]
        print(f"{pid}: killed {r['killed']}/{live} non-equivalent mutants ({r['equivalent']} equivalent, listed)")
        for key in r["survivors"]:
            print(f"  survived: {key}")
        for key in r["stale"]:
            print(f"  listed as equivalent, but killed or no longer a mutant: {key}")
    print(f"{sum(r['mutants'] for r in results.values())} mutants in {time.monotonic() - start:.0f} s")
    if out:
        from ..files import atomic_write

        atomic_write(out, json.dumps(results, indent=2) + "\n")
    return 1 if any(r["survivors"] or r["stale"] or r.get("reference_fails") for r in results.values()) else 0
