"""The pytest plugin: each (problem, check) is a test item worth the spec's points.

`pytest` at the repo root grades exercises/; `--attnkit-impl PATH` grades any directory that
follows the contract. Installed, the plugin is loaded by every pytest in the environment, so it
stays inert unless asked: its options all start with --attnkit-, and it grades only when one of
them is given or the project's own configuration says `attnkit_grade = true` (the kit's does). The learner's code runs in worker processes (see grading.py);
failures show the check's own message instead of a traceback, and the score table is
printed at the end. `attnkit grade` runs this same plugin through pytest.main.
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest


def _not_rewritten() -> None:
    """pytest rewrites the asserts of every module of a distribution that registers a plugin: all of attnkit in a
    regular install (not an editable one), each module as it is imported. The grader holds no tests, and where the
    rewritten bytecode cannot be cached (PYTHONDONTWRITEBYTECODE, as container images set; an install the user cannot
    write) that is a hundred modules parsed and compiled again on every run, half a second. Unmarked here, for this
    package only; pytest offers no public way to unmark, so where its internals differ nothing changes."""
    package = __name__.split(".")[0]
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and package in marked:
            marked.discard(package)
            memo = getattr(finder, "_marked_for_rewrite_cache", None)
            if isinstance(memo, dict):
                memo.clear()


_not_rewritten()  # first: the modules imported from here on are the kit's

from .options import BadInput, json_path, positive

from ..defaults import DEFAULT_SEED, DEFAULT_TIMEOUT

# Loaded (as an entry point) by every pytest run in the environment: at load it imports only the options' own
# checks (no spec, no torch); the grader's modules are imported once a run turns out to be grading.

IDLE_WHEN_GRADING = ("hypothesispytest",)
"""Plugins of the environment that serve test functions, which a run that collects none (grading only) does not
have, and that cost time anyway: Hypothesis's imports its whole package in its terminal summary (half a second).
They are switched off in such a run only."""


def pytest_addoption(parser):
    parser.addini("attnkit_grade", type="bool", default=False,
                  help="attnkit: a plain `pytest` in this project grades exercises/")
    group = parser.getgroup("attnkit", "attnkit grading")
    group.addoption("--attnkit-impl", dest="attnkit_impl", default=None, metavar="PATH",
                    help="directory (or .zip) to grade (default: exercises/)")
    group.addoption("--attnkit-json", dest="attnkit_json", default=None, metavar="PATH", help="write the JSON report here")
    group.addoption("--attnkit-seed", dest="attnkit_seed", type=int, default=DEFAULT_SEED, help="seed of the hidden inputs")
    group.addoption("--attnkit-timeout", dest="attnkit_timeout", type=positive(float), default=DEFAULT_TIMEOUT,
                    metavar="SECONDS", help="wall-clock limit for each problem's worker")
    group.addoption("--attnkit-only", action="store_true", help="grade only; collect no test files")
    group.addoption("--attnkit-problems", dest="attnkit_problems", default=None, metavar="ID,...",
                    help="grade only these problems (ids or unique prefixes)")
    group.addoption("--attnkit-untrusted", action="store_true",
                    help="someone else's code: refuse to grade without the OS sandbox (bubblewrap)")
    from .options import add_flags

    add_flags(group.addoption, prefix="--attnkit-")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Someone else's code (--attnkit-untrusted): pytest imports no conftest.py at all, wherever it looks. A
    submission's folder may hold one, which pytest would run itself, before any grading, as the grader's user and
    outside every sandbox (called before the initial conftests load, for plugins installed as this one is)."""
    if getattr(early_config.known_args_namespace, "attnkit_untrusted", False):
        early_config.known_args_namespace.noconftest = True


def _configured_by(impl, config) -> str | None:
    """The pytest configuration the submission's folder supplied (its ini file, or a folder of its above the root),
    which pytest has read before any plugin: None where it supplied none."""
    try:
        root = Path(impl).resolve()
    except OSError:
        return None
    for path in (config.inipath, config.rootpath):
        if path is not None and (Path(path).resolve() == root or root in Path(path).resolve().parents):
            return str(path)
    return None


def pytest_configure(config):
    o = config.option
    explicit = o.attnkit_impl is not None or o.attnkit_only or o.attnkit_json is not None
    default_run = config.getini("attnkit_grade") and config.args_source == pytest.Config.ArgsSource.TESTPATHS
    if not (explicit or default_run):
        return  # `pytest tests`, or another project: the plugin stays out of the way
    config.addinivalue_line("markers", "attnkit(problem, check, points): a graded check of the attnkit grader")
    from ..model.i18n import from_env

    from_env(warn=True)  # an $ATTNKIT_LANG that names no language says so here, before any output
    from ..run.jail import decide

    try:
        jailed = decide(True if o.attnkit_untrusted else None)
    except BadInput as exc:
        raise pytest.UsageError(f"attnkit: {exc}") from None
    if jailed:
        from ..run.jail_process import stop, warm_up
    else:
        from ..run.forkserver import stop, warm_up
    config.add_cleanup(stop)
    warm_up()  # first: the workers' sandbox or forkserver imports torch while pytest and the grader do (the specs too)
    from ..run import heap

    heap.roomy()  # a grading run's pytest: freed blocks are kept for reuse (run/heap.py), as `attnkit grade` does
    from ..run.collector import pause, settle

    pause()  # while torch and the specs load (run/collector.py): settled before grading, and at the latest here
    config.add_cleanup(settle)
    from ..run.submission import open_submission
    from .options import problem_list

    try:
        impl, unpacked = open_submission(o.attnkit_impl if o.attnkit_impl is not None else config.rootpath / "exercises",
                                         label="--attnkit-impl")
        out = json_path(o.attnkit_json) if o.attnkit_json else None
        chosen = problem_list(o.attnkit_problems)
    except BadInput as exc:
        raise pytest.UsageError(f"attnkit: {exc}") from None
    config._attnkit_unpacked = unpacked  # a zip's temporary directory lives as long as the session
    if o.attnkit_untrusted and (given := _configured_by(impl, config)) is not None:
        raise pytest.UsageError(f"attnkit: pytest read its configuration from the submission ({given}), and ran what it "
                                "names, before any grading: run pytest from a folder of your own, or grade someone "
                                "else's code with `attnkit grade --untrusted`")
    only = o.attnkit_only or config.args_source != pytest.Config.ArgsSource.ARGS  # no test paths named: grade only
    if only:
        for name in IDLE_WHEN_GRADING:
            if config.pluginmanager.has_plugin(name):
                config.pluginmanager.set_blocked(name)  # unregisters it: none of its hooks runs from here on
    from .options import from_options

    grader = Grader(impl, out, o.attnkit_seed, o.attnkit_timeout, only, from_options(o), chosen, jailed)
    config.pluginmanager.register(grader, "attnkit-grader")


class CheckFailed(Exception):
    """A failing check: `text` its whole feedback, `line` the one line pytest's short summary shows."""

    def __init__(self, text: str, line: str):
        super().__init__(text)
        self.line = line


class FailureRepr:
    """The failure section as written, with a one-line `reprcrash.message`: pytest's short summary prints that
    line, whole when CI is set (Classroom and Gradescope set it), so the feedback is not said twice."""

    def __init__(self, text: str, line: str):
        self.text, self.reprcrash = text, SimpleNamespace(message=line)

    def toterminal(self, tw) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


class ProblemNode(pytest.Collector):
    def collect(self):
        return []


class CheckItem(pytest.Item):
    def __init__(self, *, grader, problem, check, points, absent=None, **kw):
        super().__init__(**kw)
        self.grader, self.problem, self.check = grader, problem, check
        self.absent = absent  # why the problem is not graded here (a package it needs not installed), or None
        self.add_marker(pytest.mark.attnkit(problem=problem, check=check, points=points))

    def runtest(self):
        if self.absent:  # as a check skipped for want of a GPU: no points either way
            self.user_properties.append(("points", "0/0"))
            pytest.skip(f"{self.problem}: {self.absent}")
        result = self.grader.check_result(self.problem, self.check)
        self.user_properties.append(("points", f"{result.score:g}/{result.max_score:g}"))
        if result.status == "skipped":
            pytest.skip(result.message)
        if result.status != "passed":  # a mistake's block under the first selected check it explains, once
            from ..report.feedback import for_check

            text = for_check(self.grader.report.problem(self.problem), result, self.grader.shown.get(self.problem))
            lines = result.message.splitlines() or [""]  # "called ...", then what came back
            line = (f"[{result.mistake}] " if result.mistake else "") + lines[min(1, len(lines) - 1)]
            raise CheckFailed(f"{text}\n[{result.status}: 0/{result.max_score:g} points]", line)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CheckFailed):
            return FailureRepr(str(excinfo.value), excinfo.value.line)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.problem}::{self.check}"


class Grader:
    """Adds the graded items, grades lazily once, prints the table, writes the JSON."""

    def __init__(self, impl: Path, json_out: Path | None, seed: int, timeout: float, only: bool, limits=None,
                 chosen=None, jailed: bool = False):
        self.impl, self.json_out, self.seed, self.timeout, self.only = impl, json_out, seed, timeout, only
        self.limits, self.chosen, self.jailed = limits, chosen, jailed
        self.root = Path(impl).resolve()
        self.selected: list[str] = []
        self.shown: dict[str, set[str]] = {}  # the checks each selected problem shows (after -k and -m)
        self.report = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path, config):
        """Nothing of the submission is collected as tests (its conftest.py and test files are the learner's code, run
        only in the workers' sandbox); grading only: nothing at all."""
        if self.only:
            return True
        try:
            inside = Path(collection_path).resolve() == self.root or self.root in Path(collection_path).resolve().parents
        except OSError:
            inside = False
        return True if inside else None

    @pytest.hookimpl(tryfirst=True)  # before -k/-m deselection sees the items
    def pytest_collection_modifyitems(self, session, config, items):
        from ..errors import SpecError
        from ..judge.checks import validate_checks
        from ..problems import left_out, unavailable

        try:
            problems = self._problems(config.option.keyword, self.chosen)
            for problem in problems:
                validate_checks(problem)
        except SpecError as exc:
            raise pytest.UsageError(f"attnkit: the kit's own specs are broken (please report it): {exc}") from None
        from .. import ROOT

        for problem in problems:
            node = ProblemNode.from_parent(session, name=problem.id, path=ROOT, nodeid=f"attnkit::{problem.id}")
            # not graded here (a package it needs not installed, or its stage left out): skipped, saying why
            why = unavailable(problem) or (left_out(problem) if self.chosen is None or problem.id not in self.chosen
                                           else None)
            added = [CheckItem.from_parent(node, name=cid, grader=self, problem=problem.id, check=cid, points=pts,
                                           absent=why) for cid, pts in problem.points.items()]
            items.extend(added)
            # reported as collected, as a file's tests are: the terminal counts them ("3 deselected / 2 selected",
            # never a negative count when -k deselects items that were added here)
            session.ihook.pytest_collectreport(report=pytest.CollectReport(node.nodeid, "passed", None, added))

    @staticmethod
    def _problems(keyword: str, chosen=None):
        """`--problems` first; then `-k NAME` where NAME starts a problem id selects exactly those
        problems (so `-k additive` is additive_attention, not also multihead_additive_attention)."""
        from ..problems import all_problems

        import re

        problems = [p for p in all_problems() if chosen is None or p.id in chosen]
        if re.fullmatch(r"\w+", keyword or ""):
            chosen = [p for p in problems if p.id.startswith(keyword)]
            return chosen or problems
        return problems

    def pytest_collection_finish(self, session):
        seen = [i for i in session.items if isinstance(i, CheckItem) and not i.absent]
        self.selected = list(dict.fromkeys(i.problem for i in seen))
        for i in seen:
            self.shown.setdefault(i.problem, set()).add(i.check)

    def check_result(self, problem: str, check: str):
        if self.report is None:
            from ..grading import grade
            from ..run.collector import settle

            # torch and the specs stay loaded until the process ends: frozen, no collection walks them again
            # (pytest's own final gc.collect included), as in `attnkit grade`; the collector is on again from here
            settle()

            self.report = grade(self.impl, self.selected, seed=self.seed, timeout=self.timeout, limits=self.limits,
                                sandbox=self.jailed)
        return next(c for c in self.report.problem(problem).checks if c.id == check)

    def pytest_report_teststatus(self, report, config):
        """A check of a problem not started is counted as such, not as a failure whose section would repeat
        "still a stub" once per check (the run still fails); `-v` shows every check as a failure."""
        if report.when == "call" and report.failed and self.report is not None and config.option.verbose <= 0:
            problem = report.nodeid.split("::")[1] if report.nodeid.count("::") >= 2 else None
            if problem in self.selected and self.report.problem(problem).status == "not_started":
                return "not started", "n", "NOT STARTED"
        return None

    def pytest_terminal_summary(self, terminalreporter, config):
        if self.report is not None:
            from ..report.summary import next_step, table

            terminalreporter.write_sep("=", "attnkit score")
            verbose = config.option.verbose > 0
            terminalreporter.write_line(table(self.report, checks=True if verbose else "started"))
            terminalreporter.write_line(next_step(self.report))
            if self.json_out:
                terminalreporter.write_line(f"JSON report: {self.json_out}")

    def pytest_sessionfinish(self, session):
        if self.report is not None and self.json_out:
            from ..report.summary import write_json

            write_json(self.report, self.json_out)
        if self.report is not None and self.report.grader_errors:
            session.exitstatus = 3  # the grader failed on some check: not the learner's result (commands.exit_code)
