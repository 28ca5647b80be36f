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

    impl = impl_dir(args.impl if args.impl is not None else _default_impl())
    out = json_path(args.json) if args.json else None
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
    print(table(report))
    details = failures(report)
    if details:
        print("\nWhat to fix:\n" + details)
    if out:
        print(f"\nJSON report: {out}")
    return 0 if report.max_score > 0 and report.score == report.max_score else 1


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
    g.add_argument("--impl", metavar="PATH", help="directory holding the problem modules")
    g.add_argument("--json", metavar="REPORT.json", help="also write the JSON report here")
    g.add_argument("--seed", type=int, help="seed of the hidden inputs (default: the kit's)")
    g.add_argument("--timeout", type=float, metavar="SECONDS", help="wall-clock limit per problem (default 30)")
    g.set_defaults(run=cmd_grade)
    d = sub.add_parser("dev", help="for the kit's maintainers: regenerate files, self-check")
    d.add_argument("action", choices=["sync", "check"])
    d.set_defaults(run=cmd_dev)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except BadInput as exc:
        sys.stderr.write(f"attnkit: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("attnkit: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
