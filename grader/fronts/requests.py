"""The command line, resolved once into a typed request per command (`resolve`), checked here: bad input is BadInput,
one clear line and exit 2 (cli.main). The commands (commands.py, learner.py, watch.py) read these values, never
argparse's Namespace. Paths the commands echo back are kept as typed (a report quotes them as given)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ..defaults import DEFAULT_SEED, DEFAULT_TIMEOUT
from ..run.sandbox import Limits
from .options import BadInput, default_impl, from_options, json_path, problem_list


class Sandbox(Enum):
    """Where the learner's code runs: REQUIRED, someone else's code (refused without bubblewrap: grade-batch,
    --untrusted, --report); DEFAULT, as $ATTNKIT_SANDBOX says, else bubblewrap whenever usable; BEST, bubblewrap
    whenever usable, else the process sandbox, which the command records (the Gradescope runner, which always
    answers: integrations/gradescope_run.py)."""

    REQUIRED = "required"
    DEFAULT = "default"
    BEST = "best"  # bubblewrap where usable, else the process sandbox, recorded (the Gradescope runner: it always answers)

    @property
    def wanted(self) -> bool | None:
        """jail.decide's argument: True (required) or None (the default)."""
        return True if self is Sandbox.REQUIRED else None


class DevAction(Enum):
    SYNC = "sync"
    CHECK = "check"
    MUTANTS = "mutants"


class GradescopeAction(Enum):
    BUILD = "build"
    RUN = "run"


@dataclass(frozen=True)
class GradeRequest:
    """`attnkit grade`."""

    impl: str | None  # as typed (None: exercises/); the interviewer's report quotes it
    problems: tuple[str, ...] | None  # ids in track order; None: all
    seed: int
    variant: str | None  # the candidate's variant, which set `seed`
    timeout: float
    limits: Limits
    sandbox: Sandbox
    json: Path | None
    report: Path | None
    junit: Path | None
    plots: str | None  # a folder, made (and matplotlib checked) when the command runs
    lang: str | None = None
    seed_given: bool = False  # --seed or --variant typed: a bundle's recorded variant does not replace it


@dataclass(frozen=True)
class ListRequest:
    """`attnkit list`."""

    impl: Path
    lang: str | None = None


@dataclass(frozen=True)
class HintRequest:
    """`attnkit hint PROBLEM [--level N]`."""

    problem: str  # a problem id
    lang: str | None = None
    level: int | None = None  # hint N alone; None: the next level, with those before it


def _hint(a) -> HintRequest:
    from ..problems import get

    pid = _problem(a.problem)
    total = len(get(pid, "en").hints)
    if a.level is not None and a.level > total:
        raise BadInput(f"--level {a.level}: {pid} has {total} hints (1 to {total})")
    return HintRequest(pid, a.lang, a.level)


@dataclass(frozen=True)
class SolutionRequest:
    """`attnkit solution PROBLEM`."""

    problem: str
    impl: Path
    force: bool
    lang: str | None = None


@dataclass(frozen=True)
class ResetRequest:
    """`attnkit reset PROBLEM`."""

    problem: str
    impl: Path
    lang: str | None = None


@dataclass(frozen=True)
class WatchRequest:
    """`attnkit watch`."""

    impl: Path
    poll: float
    max_regrades: int | None
    lang: str | None = None


@dataclass(frozen=True)
class BatchRequest:
    """`attnkit grade-batch` (always in the sandbox)."""

    submissions: str
    out: str
    workers: int
    force: bool
    problems: tuple[str, ...] | None
    seed: int
    timeout: float
    limits: Limits
    cluster: str | None  # the scheduler's address; None: graded here
    security: object  # Dask's TLS settings for `cluster`, or None
    lang: str | None = None

    @property
    def sandbox(self) -> Sandbox:
        return Sandbox.REQUIRED


@dataclass(frozen=True)
class ClusterRequest:
    """`attnkit cluster certs DIR`."""

    directory: str
    host: str
    port: int
    days: int
    lang: str | None = None


@dataclass(frozen=True)
class ClassReportRequest:
    """`attnkit class-report RESULTS_DIR`."""

    results: str
    out: Path | None
    json: Path | None
    lang: str | None = None


@dataclass(frozen=True)
class SimilarityRequest:
    """`attnkit similarity PATH`."""

    path: Path
    threshold: float
    json: Path | None
    lang: str | None = None


@dataclass(frozen=True)
class GradescopeRequest:
    """`attnkit gradescope build OUT.zip` or `gradescope run` (the runner grades someone else's code)."""

    action: GradescopeAction
    out: str | None
    visibility: str | None
    root: str
    lang: str | None = None
    isolation: str = "auto"  # build --sandbox: what the runner may fall back to (gradescope.SANDBOXES)

    @property
    def sandbox(self) -> Sandbox:
        return Sandbox.BEST


@dataclass(frozen=True)
class ClassroomRequest:
    """`attnkit classroom init DIR`, or `classroom grade PROBLEM` (one step of its workflow)."""

    directory: str  # init: the template; grade: the problem's id
    kit: str
    lang: str | None = None
    action: str = "init"
    impl: Path | None = None  # grade: the exercises' folder


@dataclass(frozen=True)
class ExportRequest:
    """`attnkit export DIR`, and `attnkit interview start [DIR]` (with a clock: `minutes`)."""

    directory: str
    problems: tuple[str, ...]  # every problem by default
    variant: str | None
    lang: str | None = None
    minutes: int | None = None


@dataclass(frozen=True)
class CourseRequest:
    """`attnkit course init DIR`."""

    directory: str
    lang: str | None = None


@dataclass(frozen=True)
class DevRequest:
    """`attnkit dev sync|check|mutants` (the mutants' options are checked for that action only)."""

    action: DevAction
    problems: tuple[str, ...] | None
    json: Path | None
    sample: int | None
    seed: int  # of the mutants' sample


def sandbox_of(request) -> Sandbox:
    """How the command's grading is sandboxed (DEFAULT for the commands that grade the learner's own code)."""
    return getattr(request, "sandbox", Sandbox.DEFAULT)


def resolve(args):
    """The parsed command line as its command's request; BadInput where it cannot be one."""
    return _RESOLVERS[args.command](args)


def _problems(text) -> tuple[str, ...] | None:
    chosen = problem_list(text)
    return tuple(chosen) if chosen is not None else None


def _impl(text) -> Path:
    from ..run.submission import impl_dir

    return impl_dir(text if text is not None else default_impl())


def _grade(a) -> GradeRequest:
    seed = a.seed
    if a.variant is not None:
        if seed is not None:
            raise BadInput("--variant NAME sets the seed of the hidden inputs: give --variant or --seed, not both")
        from ..defaults import variant_seed

        seed = variant_seed(a.variant)
    sandbox = Sandbox.REQUIRED if a.untrusted or a.report else Sandbox.DEFAULT
    return GradeRequest(
        impl=a.impl, problems=_problems(a.problems), seed=seed if seed is not None else DEFAULT_SEED,
        variant=a.variant, timeout=a.timeout if a.timeout is not None else DEFAULT_TIMEOUT, limits=from_options(a),
        sandbox=sandbox, **_outputs(a), plots=a.plots or None, lang=a.lang, seed_given=seed is not None)


def _outputs(a) -> dict:
    """The files `grade` writes, each checked (cheap)."""
    return dict(json=json_path(a.json) if a.json else None,
                report=json_path(a.report, "--report") if a.report else None,
                junit=json_path(a.junit, "--junit") if a.junit else None)


def precheck(args) -> None:
    """grade's and grade-batch's paths checked before the sandbox or torch start: a mistyped one is said in a fraction
    of a second. The submission's in open_submission's words (of a .zip, its directory: the command unpacks it); the
    outputs are checked again by resolve, with the rest; a batch's folder as the batch lists it. BadInput where one
    is wrong."""
    if args.command == "grade":
        from ..run.submission import check_path

        check_path(args.impl if args.impl is not None else default_impl())
        _outputs(args)
    elif args.command == "grade-batch":
        from ..integrations.listing import submissions

        submissions(Path(args.submissions), say=False)


def _batch(a) -> BatchRequest:
    address, security = cluster_connection(a.cluster, a.cluster_certs, a.insecure_local)
    return BatchRequest(a.submissions, a.out, a.workers, a.force, _problems(a.problems),
                        a.seed if a.seed is not None else DEFAULT_SEED,
                        a.timeout if a.timeout is not None else DEFAULT_TIMEOUT, from_options(a), address, security,
                        a.lang)


def cluster_connection(cluster: str | None, certs: str | None, insecure_local: bool) -> tuple[str | None, object]:
    """grade-batch's --cluster, --cluster-certs and --insecure-local, checked before any work: (the address, Dask's
    TLS settings or None), or (None, None) for a local batch."""
    if cluster is None:
        if certs is not None or insecure_local:
            flag = "--cluster-certs" if certs is not None else "--insecure-local"
            raise BadInput(f"{flag} goes with --cluster ADDRESS")
        return None, None
    from ..integrations.cluster import connection

    return connection(cluster, certs, insecure_local)


def _cluster(a) -> ClusterRequest:
    if a.port > 65535:
        raise BadInput(f"--port {a.port}: a port is 1 to 65535")
    return ClusterRequest(a.directory, a.host, a.port, a.days, a.lang)


def _class_report(a) -> ClassReportRequest:
    if not a.out and not a.json:
        raise BadInput("class-report: say where to write it: --out REPORT.html and/or --json OUT.json")
    out = json_path(a.out, "--out") if a.out else None
    data = json_path(a.json) if a.json else None
    if out is not None:
        need_matplotlib()  # for the page's plots
    return ClassReportRequest(a.results, out, data, a.lang)


def _similarity(a) -> SimilarityRequest:
    try:
        import copydetect  # noqa: F401
    except ImportError:
        raise BadInput('similarity needs copydetect: pip install -e ".[similarity]"') from None
    return SimilarityRequest(Path(a.path), a.threshold, json_path(a.json) if a.json else None, a.lang)


def _gradescope(a) -> GradescopeRequest:
    action = GradescopeAction(a.action)
    if action is GradescopeAction.BUILD and not a.out:
        raise BadInput("gradescope build needs OUT.zip")
    return GradescopeRequest(action, a.out, a.visibility, a.root, a.lang, a.sandbox)


def _export(a) -> ExportRequest:
    from ..problems import ORDER

    minutes = getattr(a, "minutes", None)
    if minutes is not None and minutes > 24 * 60:
        raise BadInput(f"--minutes {minutes}: at most a day (1440)")
    return ExportRequest(a.directory, _problems(a.problems) or tuple(ORDER), a.variant, a.lang, minutes)


def _dev(a) -> DevRequest:
    action = DevAction(a.action)
    if action is not DevAction.MUTANTS:
        return DevRequest(action, None, None, None, a.seed)
    problems = _problems(a.problems) if a.problems else None
    out = json_path(a.json) if a.json else None
    if a.sample is not None and a.sample < 1:
        raise BadInput(f"--sample must be at least 1, not {a.sample}")
    return DevRequest(action, problems, out, a.sample, a.seed)


def _problem(text: str) -> str:
    from ..problems import resolve as resolve_problem

    return resolve_problem(text)


def _solution(a) -> SolutionRequest:
    impl = _impl(a.impl)
    return SolutionRequest(_problem(a.problem), impl, a.force, a.lang)


def _reset(a) -> ResetRequest:
    impl = _impl(a.impl)
    return ResetRequest(_problem(a.problem), impl, a.lang)


def _classroom(a) -> ClassroomRequest:
    if a.action == "grade":  # one step of the workflow: the problem (a unique prefix works), the exercises' folder
        return ClassroomRequest(_problem(a.directory), a.kit, a.lang, "grade", _impl(a.impl))
    return ClassroomRequest(a.directory, a.kit, a.lang)


def _course(a) -> CourseRequest:
    need_course()
    return CourseRequest(a.directory, a.lang)


def need_course() -> None:
    """nbgrader and nbformat, for `course init` (the `course` extra: a learner's install has neither)."""
    try:
        import nbformat  # noqa: F401
        import nbgrader  # noqa: F401
    except ImportError:
        raise BadInput("an nbgrader course needs nbgrader: pip install -e \".[course]\"") from None


def need_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BadInput("plots need matplotlib: pip install -e \".[plots]\"") from None


_RESOLVERS = {
    "grade": _grade,
    "list": lambda a: ListRequest(_impl(a.impl), a.lang),
    "hint": _hint,
    "watch": lambda a: WatchRequest(_impl(a.impl), a.poll, a.max_regrades, a.lang),
    "solution": _solution,
    "reset": _reset,
    "grade-batch": _batch,
    "cluster": _cluster,
    "class-report": _class_report,
    "similarity": _similarity,
    "gradescope": _gradescope,
    "classroom": _classroom,
    "export": _export,
    "interview": _export,
    "course": _course,
    "dev": _dev,
}
