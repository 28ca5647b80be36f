"""What `attnkit grade`, `grade-batch`, `cluster`, `export`, `gradescope`, `classroom`, `course` and `dev` do
(the learner's commands are in learner.py and watch.py; the parser is cli.py)."""
from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path

from .options import BadInput, default_impl, json_path


def cmd_grade(args) -> int:
    from ..report.summary import failures, table
    from ..report.term import fancy
    from ..run.submission import open_submission

    from ..judge.checks import validate_checks
    from ..problems import all_problems

    for problem in all_problems(args.lang):  # a broken spec: one clear line (exit 3), before any grading
        validate_checks(problem)
    if args.variant is not None:
        if args.seed is not None:
            raise BadInput("--variant NAME sets the seed of the hidden inputs: give --variant or --seed, not both")
        from ..defaults import variant_seed

        args.seed = variant_seed(args.variant)
    impl, unpacked = open_submission(args.impl if args.impl is not None else default_impl())
    out = json_path(args.json) if args.json else None
    md = json_path(args.report, "--report") if args.report else None
    junit = json_path(args.junit, "--junit") if args.junit else None
    plots = _plots_dir(args.plots) if args.plots else None
    try:
        report = _grade_in_pytest(args, impl, junit) if junit else _grade_here(args, impl)
        attempts = _attempts(impl, report) if md else None  # read before a zip's folder is removed
    finally:
        if unpacked:
            unpacked.cleanup()
    report.variant = args.variant
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

        write(report, md, str(args.impl), ["grade", *sys.argv[2:]] if sys.argv[1:2] == ["grade"] else ["grade"],
              attempts)
        print(f"interviewer's report: {md}")
    if plots:
        from ..report.plots import write_plots

        for path in write_plots(report, plots):
            print(f"plot: {path}")
    return exit_code(report)


def _attempts(impl, report) -> list[str]:
    """The attempt log's section of the interviewer's report: the public checks' runs, as the candidate's machine
    logged them."""
    from ..integrations.public import cases
    from ..problems import get
    from ..report.attempts import read, timeline

    known = {c["id"]: p.id for p in map(get, (p.id for p in report.problems)) for c in cases(p)}
    return timeline(read(impl, known), known)


def _grade_here(args, impl):
    """The grading core, called directly: what the pytest plugin runs, without pytest's start-up."""
    import gc

    gc.freeze()  # torch and the specs stay loaded for good: no collection walks them again (a tenth of a second each)
    from ..defaults import DEFAULT_SEED, DEFAULT_TIMEOUT
    from ..grading import grade
    from ..run.jail import decide
    from .options import from_options, problem_list

    report = grade(impl, problem_list(args.problems), seed=args.seed if args.seed is not None else DEFAULT_SEED,
                   timeout=args.timeout if args.timeout is not None else DEFAULT_TIMEOUT, limits=from_options(args),
                   sandbox=decide(True if untrusted(args) else None))
    return report


def _grade_in_pytest(args, impl, junit):
    """The same grading as pytest items (one per check), for the JUnit XML that pytest writes (--junit)."""
    import pytest

    from ..defaults import DEFAULT_SEED, DEFAULT_TIMEOUT
    from .options import as_args, problem_list

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
            "--attnkit-seed", str(args.seed if args.seed is not None else DEFAULT_SEED),
            "--attnkit-timeout", str(args.timeout if args.timeout is not None else DEFAULT_TIMEOUT),
            f"--junitxml={junit}"]
    if args.problems:
        argv += ["--attnkit-problems", ",".join(problem_list(args.problems))]
    argv += as_args(args)
    if untrusted(args):
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


def _need_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BadInput("plots need matplotlib: pip install -e \".[plots]\"") from None


def _plots_dir(path) -> Path:
    _need_matplotlib()
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise BadInput(f"--plots {path}: not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--plots {path}: cannot create it ({exc.strerror})") from None
    return p


def cmd_batch(args) -> int:
    from ..integrations.batch import run
    from ..defaults import DEFAULT_SEED, DEFAULT_TIMEOUT
    from .options import from_options

    from .options import problem_list

    address, security = getattr(args, "connection", None) or cluster_connection(args)
    rows = run(args.submissions, args.out, workers=args.workers, force=args.force, cluster=address,
               security=security,
               problem_ids=problem_list(args.problems),
               seed=args.seed if args.seed is not None else DEFAULT_SEED,
               timeout=args.timeout if args.timeout is not None else DEFAULT_TIMEOUT, limits=from_options(args),
               sandbox=True)
    print(f"{len(rows)} submissions: results in {args.out} (grades.csv)")
    return 0


def cluster_connection(args) -> tuple[str | None, object]:
    """grade-batch's --cluster, --cluster-certs and --insecure-local, checked before any work: (the address, Dask's
    TLS settings or None), or (None, None) for a local batch."""
    if args.cluster is None:
        if args.cluster_certs is not None or args.insecure_local:
            flag = "--cluster-certs" if args.cluster_certs is not None else "--insecure-local"
            raise BadInput(f"{flag} goes with --cluster ADDRESS")
        return None, None
    from ..integrations.cluster import connection

    return connection(args.cluster, args.cluster_certs, args.insecure_local)


def cmd_cluster(args) -> int:
    """`attnkit cluster certs DIR`: a CA and the scheduler's, workers' and client's certificates; the command lines."""
    from ..integrations.cluster_certs import make, summary

    if args.port > 65535:
        raise BadInput(f"--port {args.port}: a port is 1 to 65535")
    folder = make(args.directory, days=args.days)
    print(summary(folder, host=args.host, port=args.port))
    return 0


def cmd_gradescope(args) -> int:
    from ..integrations import gradescope

    if args.action == "run":
        return gradescope.run(args.root)
    if not args.out:
        raise BadInput("gradescope build needs OUT.zip")
    print(f"wrote {gradescope.build(args.out, args.visibility)}: upload it as the autograder (Configure Autograder, "
          "zip file)")
    return 0


def cmd_class_report(args) -> int:
    from ..report.class_report import write

    if not args.out and not args.json:
        raise BadInput("class-report: say where to write it: --out REPORT.html and/or --json OUT.json")
    out = json_path(args.out, "--out") if args.out else None
    data = json_path(args.json) if args.json else None
    if out is not None:
        _need_matplotlib()  # for the page's plots
    s = write(args.results, out, data)
    print(f"{s['submissions']} submissions, {s['graded']} graded" + "".join(f"; wrote {p}" for p in (out, data) if p))
    return 0


def cmd_similarity(args) -> int:
    from ..integrations.similarity import pairs, source_of

    try:
        import copydetect  # noqa: F401
    except ImportError:
        raise BadInput('similarity needs copydetect: pip install -e ".[similarity]"') from None
    out = json_path(args.json) if args.json else None
    found = pairs(source_of(Path(args.path)), args.threshold)
    from ..run.inbox import clean

    for f in found:  # submission names are the submitters' file names: no control characters reach the terminal
        per = ", ".join(f"{pid} {s:.0%}" for pid, s in f["problems"].items())
        print(f"{f['similarity']:.0%}  {clean(f['a'], 100)}  {clean(f['b'], 100)}  ({f['tokens']} tokens alike; {per})")
    print(f"{len(found)} pair(s) at or above {args.threshold:.0%} alike (beyond the stubs and the kit's public code)")
    if out:
        from ..files import atomic_write
        import json

        atomic_write(out, json.dumps({"threshold": args.threshold, "pairs": found}, indent=2) + "\n")
    return 0


def cmd_classroom(args) -> int:
    from ..integrations.classroom import init

    print(f"wrote {init(args.directory, args.kit)}")
    return 0


def cmd_export(args) -> int:
    from ..integrations.export import export

    from .options import problem_list
    from ..problems import ORDER

    for path in export(args.directory, problem_list(args.problems) or list(ORDER), args.variant):
        print(f"wrote {path}")
    variant = f" --variant {shlex.quote(args.variant)}" if args.variant is not None else ""
    print(f"give the candidate {args.directory}; grade what comes back with `attnkit grade --impl submission.zip"
          f"{variant} --report report.md`")
    return 0


def cmd_course(args) -> int:
    from ..integrations.course import ASSIGNMENT, init

    for path in init(args.directory, args.lang):
        print(f"wrote {path}")
    print(f"next: cd {args.directory} && nbgrader generate_assignment {ASSIGNMENT}")
    return 0


def cmd_dev(args) -> int:
    from ..dev.tasks import sync

    if args.action == "mutants":
        return _mutants(args)
    if args.action == "sync":
        for line in sync() or ["everything generated is fresh"]:
            print(line)
        return 0
    from ..dev.tasks import self_check

    problems = self_check()
    for line in problems:
        print(line)
    print("dev check: ok" if not problems else f"dev check: {len(problems)} problem(s)")
    return 1 if problems else 0


def _mutants(args) -> int:
    """Print `killed K/N non-equivalent mutants` per problem; exit 1 if any mutant survives unlisted."""
    import json
    import time

    from ..defaults import DEFAULT_SEED
    from ..dev.mutants import run
    from .options import problem_list
    from ..problems import all_problems, get

    chosen = problem_list(args.problems) if args.problems else None
    problems = [get(pid) for pid in chosen] if chosen else all_problems()
    out = json_path(args.json) if args.json else None
    if args.sample is not None and args.sample < 1:
        raise BadInput(f"--sample must be at least 1, not {args.sample}")
    start = time.monotonic()
    results = run(problems, DEFAULT_SEED, args.sample, args.seed)
    for pid, r in results.items():
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
    return 1 if any(r["survivors"] or r["stale"] for r in results.values()) else 0


def untrusted(args) -> bool:
    """Someone else's code: the sandbox is required (grade-batch, the Gradescope runner, --untrusted, --report)."""
    return args.command in ("grade-batch", "gradescope") or bool(getattr(args, "untrusted", False) or
                                                                 getattr(args, "report", None))
