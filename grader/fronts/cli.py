"""attnkit: grade an implementation, and keep the kit's generated files fresh."""
from __future__ import annotations

import argparse
import sys

from .commands import (cmd_batch, cmd_classroom, cmd_cluster, cmd_course, cmd_dev, cmd_export, cmd_grade,
                       cmd_class_report, cmd_gradescope, cmd_similarity)
from ..errors import SpecError
from ..model.spec import VISIBILITIES
from .options import BadInput, positive, share, variant_name
from .requests import DevRequest, precheck, resolve, sandbox_of


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.exit(2)


def add_limit_flags(p) -> None:
    from .options import add_flags

    p.add_argument("--timeout", type=positive(float), metavar="SECONDS", help="wall-clock limit per problem (default 30)")
    add_flags(p.add_argument)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="attnkit", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    g = sub.add_parser("grade", help="grade an implementation directory or .zip (default: exercises/)")
    g.add_argument("--impl", metavar="PATH", help="directory holding the problem modules, or a .zip of one")
    g.add_argument("--json", metavar="REPORT.json", help="also write the JSON report here")
    g.add_argument("--plots", metavar="DIR", help="write a PNG of the attention weights per failing check here")
    g.add_argument("--seed", type=int, help="seed of the hidden inputs (default: the kit's)")
    g.add_argument("--variant", metavar="NAME", type=variant_name,
                   help="grade the variant NAME that `attnkit export --variant NAME` gave the candidate (its own seed)")
    g.add_argument("--problems", metavar="ID,...", help="grade only these problems (ids or unique prefixes)")
    g.add_argument("--report", metavar="REPORT.md", help="write the interviewer's report (markdown) here")
    g.add_argument("--junit", metavar="PATH.xml", help="write JUnit XML (one test case per check) here")
    g.add_argument("--untrusted", action="store_true",
                   help="someone else's code: refuse to grade without the OS sandbox (bubblewrap); --report implies it")
    add_limit_flags(g)
    g.set_defaults(run=cmd_grade)
    from .learner import cmd_hint, cmd_list, cmd_reset, cmd_solution

    ls = sub.add_parser("list", help="every problem with its status and score, and your progress")
    _impl_arg(ls)
    ls.set_defaults(run=cmd_list)
    h = sub.add_parser("hint", help="the next hint for a problem (one level at a time); --level N shows hint N alone")
    h.add_argument("problem")
    h.add_argument("--level", type=positive(int), default=None, metavar="N",
                   help="show hint N alone (again, or ahead: the hints up to N count as shown)")
    h.set_defaults(run=cmd_hint)
    w = sub.add_parser("watch", help="re-grade the problem you edit on every save")
    _impl_arg(w)
    w.add_argument("--poll", type=float, default=0.05, metavar="SECONDS", help=argparse.SUPPRESS)
    w.add_argument("--max-regrades", type=int, default=None, help=argparse.SUPPRESS)
    w.set_defaults(run=lambda a: __import__("attnkit.fronts.watch", fromlist=["cmd_watch"]).cmd_watch(a))
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
    b.add_argument("--problems", metavar="ID,...", help="grade only these problems (ids or unique prefixes)")
    b.add_argument("--cluster", metavar="ADDRESS", help="grade on the Dask cluster whose scheduler is at ADDRESS "
                   "(tls://host:8786); each worker needs attnkit and bubblewrap (docs/cluster.md)")
    b.add_argument("--cluster-certs", metavar="DIR", help="the cluster's TLS certificates (what `attnkit cluster "
                   "certs DIR` wrote; default: $ATTNKIT_CLUSTER_CERTS): required with --cluster")
    b.add_argument("--insecure-local", action="store_true", help="--cluster without certificates, over tcp://, to "
                   "a scheduler on this machine only (127.0.0.1, localhost, [::1]): for tests and trials")
    add_limit_flags(b)
    b.set_defaults(run=cmd_batch)
    cs = sub.add_parser("cluster", help="for instructors: the TLS certificates of a secured Dask cluster "
                        "(grade-batch --cluster)")
    cs.add_argument("action", choices=["certs"])
    cs.add_argument("directory", metavar="DIR", help="where to write them (created 0700; nothing is overwritten)")
    cs.add_argument("--host", default="SCHEDULER_HOST", help="the scheduler's host name or address, for the printed "
                    "command lines")
    cs.add_argument("--port", type=positive(int), default=8786, help="the scheduler's port (default 8786)")
    cs.add_argument("--days", type=positive(int), default=365, help="how long the certificates are valid "
                    "(default 365)")
    cs.set_defaults(run=cmd_cluster)
    cr = sub.add_parser("class-report", help="for instructors: one HTML page of a class's grade-batch results")
    cr.add_argument("results", metavar="RESULTS_DIR", help="what `attnkit grade-batch ... --out RESULTS_DIR` wrote")
    cr.add_argument("--out", metavar="REPORT.html", help="the page to write (self-contained: it opens offline)")
    cr.add_argument("--json", metavar="OUT.json", help="the same numbers as JSON")
    cr.set_defaults(run=cmd_class_report)
    sim = sub.add_parser("similarity", help="for instructors: pairs of submissions whose code is suspiciously alike")
    sim.add_argument("path", metavar="SUBMISSIONS_OR_RESULTS",
                     help="a folder of submissions (directories, .zip files), or what grade-batch --out wrote")
    sim.add_argument("--threshold", type=share, default=0.6, metavar="F",
                     help="list pairs sharing at least this share of their code beyond the stubs (0..1, default 0.6)")
    sim.add_argument("--json", metavar="OUT.json", help="also write the pairs as JSON")
    sim.set_defaults(run=cmd_similarity)
    gs = sub.add_parser("gradescope", help="for courses on Gradescope: build the autograder, or run it")
    gs.add_argument("action", choices=["build", "run"])
    gs.add_argument("out", nargs="?", metavar="OUT.zip", help="build: the autograder zip to write")
    gs.add_argument("--visibility", choices=VISIBILITIES,
                    help="build: who sees each check's result (default: visible at once; a spec's field visibility "
                    "overrides it per check)")
    gs.add_argument("--sandbox", choices=["auto", "bwrap"], default="auto",
                    help="build: where bubblewrap cannot run on Gradescope's machine, grade in the process sandbox "
                    "and record it (auto, the default), or give every submission an autograder error (bwrap)")
    gs.add_argument("--root", default="/autograder", help=argparse.SUPPRESS)
    gs.set_defaults(run=cmd_gradescope)
    cl = sub.add_parser("classroom", help="for GitHub Classroom: write the template (stubs, autograding workflow); "
                        "grade: one step of that workflow")
    cl.add_argument("action", choices=["init", "grade"])
    cl.add_argument("directory", metavar="DIR|PROBLEM", help="init: the assignment's template repository; grade: "
                    "the problem to grade")
    cl.add_argument("--kit", default="attnkit", metavar="REQUIREMENT",
                    help="init: how the workflow installs attnkit: a pip requirement (git URL, private index)")
    _impl_arg(cl)
    cl.set_defaults(run=cmd_classroom)
    e = sub.add_parser("export", help="for interviewers: write a candidate bundle (stubs, README, public checks)")
    e.add_argument("directory", metavar="DIR")
    e.add_argument("--problems", metavar="ID,...", help="which problems (default: all); a unique prefix works")
    e.add_argument("--variant", metavar="NAME", type=variant_name,
                   help="a variant of the hidden inputs for this candidate (grade with the same --variant NAME)")
    e.set_defaults(run=cmd_export)
    iv = sub.add_parser("interview", help="a timed mock interview: a bundle whose clock starts now")
    iv.add_argument("action", choices=["start"])
    iv.add_argument("directory", metavar="DIR", nargs="?", default="interview", help="where (default: interview/)")
    iv.add_argument("--problems", metavar="ID,...", help="which problems (default: all); a unique prefix works")
    iv.add_argument("--minutes", type=positive(int), default=45, help="the time limit (default 45)")
    iv.add_argument("--variant", metavar="NAME", type=variant_name, help="as for export")
    iv.set_defaults(run=cmd_export)
    c = sub.add_parser("course", help="for instructors: make an nbgrader course")
    c.add_argument("action", choices=["init"])
    c.add_argument("directory", metavar="DIR")
    c.set_defaults(run=cmd_course)
    d = sub.add_parser("dev", help="for the kit's maintainers: regenerate files, self-check, mutation testing")
    d.add_argument("action", choices=["sync", "check", "mutants"])
    d.add_argument("--problems", metavar="ID,...", help="mutants: which problems (default: all); a unique prefix works")
    d.add_argument("--json", metavar="OUT", help="mutants: also write the results as JSON")
    d.add_argument("--sample", type=int, metavar="N", help="mutants: grade N mutants per problem, drawn with --seed")
    d.add_argument("--seed", type=int, default=0, metavar="N", help="mutants: seed of the sample (default 0)")
    d.set_defaults(run=cmd_dev)
    for name, command in sub.choices.items():
        if name != "dev":  # generated files are English (and Chinese) whatever the chosen language
            command.add_argument("--lang", choices=["en", "zh"], help="statements, hints and mistakes in English "
                                 "or Simplified Chinese (default: $ATTNKIT_LANG, else en)")
    return p


def _impl_arg(p) -> None:
    p.add_argument("--impl", metavar="PATH", help="directory holding the problem modules (default: exercises/)")


def main(argv=None) -> int:
    """The command line, parsed and resolved here into its command's request (requests.py), which the command gets."""
    from ..run.collector import finish, pause, settle

    pause()  # while torch and the specs load (run/collector.py); settled once they have
    args = parser().parse_args(argv)
    from ..model.i18n import from_env, using

    args.lang = getattr(args, "lang", None) or from_env(warn=True)  # passed down to the commands
    try:
        grading = args.command in GRADING and getattr(args, "cluster", None) is None  # on a cluster, the workers grade
        if grading:
            precheck(args)  # a mistyped path said now, not after a sandbox has started
            _spare_early(args)
        request = resolve(args)  # every flag checked here, before any work (the cluster's too)
        if grading:
            _warm_up(request)
            _load_specs()
        settle()
        with using(args.lang):  # for the callers of problems.get that pass no language (grading.py)
            return args.run(request)
    except BadInput as exc:  # one line whatever it quotes (a submission's or a member's name, a path)
        from ..run.inbox import one_line

        sys.stderr.write(f"attnkit: error: {one_line(exc, 2000)}\n")
        return 2
    except SpecError as exc:
        from ..run.inbox import one_line

        sys.stderr.write(f"attnkit: the kit's own specs are broken (please report it): {one_line(exc, 2000)}\n")
        return 3
    except KeyboardInterrupt:
        sys.stderr.write("attnkit: interrupted\n")
        return 130
    finally:
        from ..run.forkserver import stop
        from ..run.jail_process import stop as stop_sandboxes

        stop()  # the workers' server ends with the command, not a moment after it
        stop_sandboxes()
        # The process ends next: Python's last garbage collections would walk every object torch made (half a
        # second); frozen, they are skipped. Files and processes are closed above, not by the collector. The collector
        # is on again for a caller that goes on (a test calling main), also where the command stopped before settle().
        finish()


GRADING = ("grade", "grade-batch", "gradescope", "list", "watch", "solution", "dev")
"""The commands that grade here: what they need is started before anything else (_warm_up)."""


def _load_specs() -> None:
    """The specs (and torch with them), loaded now that the sandbox or the forkserver is starting: with the collector
    paused, before settle() freezes them (a command that grades loads them all anyway: ordering --problems does)."""
    from ..problems import all_problems

    try:
        all_problems()
    except SpecError:  # said by the command, in its own words
        pass


def _spare_early(args) -> None:
    """A spare bubblewrap sandbox started before the command line is resolved, where one will be wanted whatever
    the flags say: resolving --problems loads the specs (torch, a second), which the sandbox's own start (its torch)
    should not wait for. _warm_up decides after, and stops it where the request grades without one."""
    from ..run.jail import likely

    if args.command != "dev" and likely():
        from ..run.jail_process import warm_up

        warm_up()


def _warm_up(request) -> None:
    """Start what grading needs while we import torch: a spare bubblewrap sandbox, else the forkserver.
    Refuses here, before any work, when the sandbox is required and unusable."""
    from ..run.jail import decide, unusable
    from .requests import BatchRequest, ListRequest, Sandbox, WatchRequest

    sandbox = sandbox_of(request)
    if isinstance(request, DevRequest) or not (unusable() is None if sandbox is Sandbox.BEST else decide(sandbox.wanted)):
        from ..run.forkserver import warm_up
        from ..run.jail_process import stop

        stop()  # a spare started early (_spare_early) that this request does not use
        warm_up()  # the workers' forkserver imports torch while we do
        return
    from ..run.jail_process import warm_up as warm_up_sandbox

    warm_up_sandbox(repeat=isinstance(request, (BatchRequest, WatchRequest, ListRequest)))


def entry() -> None:
    """The console script: main(), then the process ends without Python's own teardown. Every exit handler runs (a
    temporary folder's cleanup, multiprocessing's), the output is flushed, and only the interpreter's finalization is
    skipped: with torch loaded it frees every object one by one and unloads its libraries, about half a second of CPU
    after the last line is printed (measured: `import torch` then exit, 2.77 s of CPU with gc frozen, 2.31 s ended
    this way). A caller that goes on (a test calling main) is not affected: only the command ends so."""
    import atexit
    import os

    from ..run import heap

    heap.roomy()  # this process's memory is nobody's measurement: freed blocks are kept for reuse (run/heap.py)
    try:
        code = main()
    except BrokenPipeError:  # the reader went away (`attnkit list | head`): no traceback, nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`attnkit list | head`): nothing more can be said
            pass
    os._exit(0 if code is None else code if isinstance(code, int) else 1)


if __name__ == "__main__":
    entry()
