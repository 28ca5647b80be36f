"""attnkit: grade an implementation, and keep the kit's generated files fresh."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import ROOT
from .options import BadInput, impl_dir, json_path


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.exit(2)


def _default_impl() -> Path:
    here = Path.cwd() / "exercises"
    return here if here.is_dir() else ROOT / "exercises"


def cmd_grade(args) -> int:
    import pytest

    from .defaults import DEFAULT_SEED, DEFAULT_TIMEOUT
    from .report import failures, table
    from .term import fancy

    from .submission import open_submission

    impl, unpacked = open_submission(args.impl if args.impl is not None else _default_impl())
    out = json_path(args.json) if args.json else None
    md = json_path(args.report, "--report") if args.report else None
    junit = json_path(args.junit, "--junit") if args.junit else None
    plots = _plots_dir(args.plots) if args.plots else None
    seen = {}

    class Capture:
        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session):
            seen["grader"] = session.config.pluginmanager.get_plugin("attnkit-grader")

    argv = [str(Path(__file__).parent), "-p", "no:terminal", "-p", "no:cacheprovider",
            "--noconftest", "--attnkit-only", "--impl", str(impl),
            "--seed", str(args.seed if args.seed is not None else DEFAULT_SEED),
            "--problem-timeout", str(args.timeout if args.timeout is not None else DEFAULT_TIMEOUT)]
    if out:
        argv += ["--json", str(out)]
    if junit:
        argv += [f"--junitxml={junit}"]
    from .sandbox import as_args

    argv += as_args(args)
    try:
        pytest.main(argv, plugins=[Capture()])
    finally:
        if unpacked:
            unpacked.cleanup()
    report = getattr(seen.get("grader"), "report", None)
    if report is None:
        raise BadInput("grading did not run: is attnkit installed (pip install -e .)? Its pytest plugin is missing")
    print(table(report, colour=fancy()))
    details = failures(report)
    if details:
        print("\nWhat to fix:\n" + details)
    if out:
        print(f"\nJSON report: {out}")
    if md:
        from .interview import write

        write(report, md, str(args.impl), ["grade", *sys.argv[2:]] if sys.argv[1:2] == ["grade"] else ["grade"])
        print(f"interviewer's report: {md}")
    if plots:
        from .plots import write_plots

        for path in write_plots(report, plots):
            print(f"plot: {path}")
    return 0 if report.max_score > 0 and report.score == report.max_score else 1


def add_limit_flags(p) -> None:
    from .sandbox import add_flags

    p.add_argument("--timeout", type=float, metavar="SECONDS", help="wall-clock limit per problem (default 30)")
    add_flags(p.add_argument)


def _plots_dir(path) -> Path:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BadInput("--plots needs matplotlib: pip install -e \".[plots]\"") from None
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise BadInput(f"--plots {path}: not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--plots {path}: cannot create it ({exc.strerror})") from None
    return p


def problem_list(text) -> list[str]:
    """--problems ID,...: ids or unique prefixes, in track order; every unknown one is an error."""
    from .learner import resolve
    from .problems import ORDER

    if not text:
        return list(ORDER)
    chosen = {resolve(name.strip()) for name in text.split(",") if name.strip()}
    return [pid for pid in ORDER if pid in chosen]


def cmd_batch(args) -> int:
    from .batch import run
    from .defaults import DEFAULT_SEED, DEFAULT_TIMEOUT
    from .sandbox import from_options

    rows = run(args.submissions, args.out, workers=args.workers, force=args.force,
               seed=args.seed if args.seed is not None else DEFAULT_SEED,
               timeout=args.timeout if args.timeout is not None else DEFAULT_TIMEOUT, limits=from_options(args))
    print(f"{len(rows)} submissions: results in {args.out} (grades.csv)")
    return 0


def cmd_gradescope(args) -> int:
    from . import gradescope

    if args.action == "run":
        return gradescope.run(args.root)
    if not args.out:
        raise BadInput("gradescope build needs OUT.zip")
    print(f"wrote {gradescope.build(args.out)}: upload it as the autograder (Configure Autograder, zip file)")
    return 0


def cmd_classroom(args) -> int:
    from .classroom import init

    print(f"wrote {init(args.directory, args.kit)}")
    return 0


def cmd_export(args) -> int:
    from .export import export

    for path in export(args.directory, problem_list(args.problems)):
        print(f"wrote {path}")
    print(f"give the candidate {args.directory}; grade what comes back with `attnkit grade --impl submission.zip "
          f"--report report.md`")
    return 0


def cmd_course(args) -> int:
    from .course import ASSIGNMENT, init

    for path in init(args.directory):
        print(f"wrote {path}")
    print(f"next: cd {args.directory} && nbgrader generate_assignment {ASSIGNMENT}")
    return 0


def cmd_dev(args) -> int:
    from .dev import sync

    if args.action == "sync":
        for line in sync() or ["everything generated is fresh"]:
            print(line)
        return 0
    from .dev import self_check

    problems = self_check()
    for line in problems:
        print(line)
    print("dev check: ok" if not problems else f"dev check: {len(problems)} problem(s)")
    return 1 if problems else 0


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="attnkit", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    g = sub.add_parser("grade", help="grade an implementation directory or .zip (default: exercises/)")
    g.add_argument("--impl", metavar="PATH", help="directory holding the problem modules, or a .zip of one")
    g.add_argument("--json", metavar="REPORT.json", help="also write the JSON report here")
    g.add_argument("--plots", metavar="DIR", help="write a PNG of the attention weights per failing check here")
    g.add_argument("--seed", type=int, help="seed of the hidden inputs (default: the kit's)")
    g.add_argument("--report", metavar="REPORT.md", help="write the interviewer's report (markdown) here")
    g.add_argument("--junit", metavar="PATH.xml", help="write JUnit XML (one test case per check) here")
    add_limit_flags(g)
    g.set_defaults(run=cmd_grade)
    from .learner import cmd_hint, cmd_list, cmd_reset, cmd_solution

    ls = sub.add_parser("list", help="every problem with its status and score, and your progress")
    _impl_arg(ls)
    ls.set_defaults(run=cmd_list)
    h = sub.add_parser("hint", help="the next hint for a problem (one level at a time)")
    h.add_argument("problem")
    h.set_defaults(run=cmd_hint)
    w = sub.add_parser("watch", help="re-grade the problem you edit on every save")
    _impl_arg(w)
    w.add_argument("--poll", type=float, default=0.05, metavar="SECONDS", help=argparse.SUPPRESS)
    w.add_argument("--max-regrades", type=int, default=None, help=argparse.SUPPRESS)
    w.set_defaults(run=lambda a: __import__("grader.watch", fromlist=["cmd_watch"]).cmd_watch(a))
    s = sub.add_parser("solution", help="the reference solution, once your implementation passes")
    s.add_argument("problem")
    s.add_argument("--force", action="store_true", help="show it before passing (recorded in the state file)")
    _impl_arg(s)
    s.set_defaults(run=cmd_solution)
    r = sub.add_parser("reset", help="back up your file and restore the stub")
    r.add_argument("problem")
    _impl_arg(r)
    r.set_defaults(run=cmd_reset)
    b = sub.add_parser("grade-batch", help="grade every submission (directory or .zip) in a folder")
    b.add_argument("submissions", metavar="SUBMISSIONS_DIR")
    b.add_argument("--out", required=True, metavar="DIR", help="one JSON per submission, and grades.csv")
    b.add_argument("--workers", type=int, default=2, metavar="N", help="submissions graded at a time (default 2)")
    b.add_argument("--force", action="store_true", help="grade again what is already in --out")
    b.add_argument("--seed", type=int, help="seed of the hidden inputs (default: the kit's)")
    add_limit_flags(b)
    b.set_defaults(run=cmd_batch)
    gs = sub.add_parser("gradescope", help="for courses on Gradescope: build the autograder, or run it")
    gs.add_argument("action", choices=["build", "run"])
    gs.add_argument("out", nargs="?", metavar="OUT.zip", help="build: the autograder zip to write")
    gs.add_argument("--root", default="/autograder", help=argparse.SUPPRESS)
    gs.set_defaults(run=cmd_gradescope)
    cl = sub.add_parser("classroom", help="for GitHub Classroom: write the autograding workflow")
    cl.add_argument("action", choices=["init"])
    cl.add_argument("directory", metavar="DIR", help="the assignment's template repository")
    cl.add_argument("--kit", default="attnkit", metavar="REQUIREMENT",
                    help="how the workflow installs attnkit: a pip requirement (git URL, private index)")
    cl.set_defaults(run=cmd_classroom)
    e = sub.add_parser("export", help="for interviewers: write a candidate bundle (stubs, README, public checks)")
    e.add_argument("directory", metavar="DIR")
    e.add_argument("--problems", metavar="ID,...", help="which problems (default: all); a unique prefix works")
    e.set_defaults(run=cmd_export)
    c = sub.add_parser("course", help="for instructors: make an nbgrader course")
    c.add_argument("action", choices=["init"])
    c.add_argument("directory", metavar="DIR")
    c.set_defaults(run=cmd_course)
    d = sub.add_parser("dev", help="for the kit's maintainers: regenerate files, self-check")
    d.add_argument("action", choices=["sync", "check"])
    d.set_defaults(run=cmd_dev)
    return p


def _impl_arg(p) -> None:
    p.add_argument("--impl", metavar="PATH", help="directory holding the problem modules (default: exercises/)")


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.command in ("grade", "grade-batch", "gradescope", "list", "watch", "solution", "dev"):
        from .forkserver import warm_up

        warm_up()  # the workers' forkserver imports torch while we do
    try:
        if hasattr(args, "impl") and args.command != "grade":
            args.impl = impl_dir(args.impl if args.impl is not None else _default_impl())
        return args.run(args)
    except BadInput as exc:
        sys.stderr.write(f"attnkit: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("attnkit: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
