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

    impl = args.impl
    out = json_path(args.json) if args.json else None
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
    pytest.main(argv, plugins=[Capture()])
    report = getattr(seen.get("grader"), "report", None)
    if report is None:
        raise BadInput("grading did not run: is attnkit installed (pip install -e .)? Its pytest plugin is missing")
    print(table(report, colour=fancy()))
    details = failures(report)
    if details:
        print("\nWhat to fix:\n" + details)
    if out:
        print(f"\nJSON report: {out}")
    if plots:
        from .plots import write_plots

        for path in write_plots(report, plots):
            print(f"plot: {path}")
    return 0 if report.max_score > 0 and report.score == report.max_score else 1


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
    g = sub.add_parser("grade", help="grade an implementation directory (default: exercises/)")
    _impl_arg(g)
    g.add_argument("--json", metavar="REPORT.json", help="also write the JSON report here")
    g.add_argument("--plots", metavar="DIR", help="write a PNG of the attention weights per failing check here")
    g.add_argument("--seed", type=int, help="seed of the hidden inputs (default: the kit's)")
    g.add_argument("--timeout", type=float, metavar="SECONDS", help="wall-clock limit per problem (default 30)")
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
    if args.command in ("grade", "list", "watch", "solution", "dev"):
        from .forkserver import warm_up

        warm_up()  # the workers' forkserver imports torch while we do
    try:
        if hasattr(args, "impl"):
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
