"""What a grading run produces, per check, per problem and in all: leaf types every layer may use."""
from __future__ import annotations

from enum import Enum
from dataclasses import asdict, dataclass, field


class Word(str, Enum):
    """An enum whose members are their words: equal to, hashed, formatted and written to JSON as the string."""

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Verdict(Word):
    """A check's status."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # not run here (a CUDA check without a GPU): left out of the maximum
    ERROR = "error"  # the grader failed before any learner code ran: left out of the maximum


class Status(Word):
    """A problem's status."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_STARTED = "not_started"


@dataclass
class CheckResult:
    id: str
    title: str
    status: Verdict
    score: float
    max_score: float
    message: str = ""
    mistake: str | None = None
    evidence: dict | None = field(default=None, repr=False)  # the failing call's weights (for plots), not in JSON
    symptom: str | None = field(default=None, repr=False)  # a mistake id the check's own evidence shows (diagnose.py)


@dataclass
class Use:
    """What the submission's source refers to that the grader enforces the contract against (judge/scan/),
    read without running it: listed for the interviewer; `refused` where this problem's contract refuses it."""
    capability: str  # a judge.scan.Capability value
    file: str  # the module, e.g. "flash_attention.py" (a sibling it imports, too)
    line: int
    what: str  # the grader's own words, never the learner's text
    refused: bool = False


@dataclass
class ProblemResult:
    id: str
    title: str
    status: Status
    score: float
    max_score: float
    checks: list[CheckResult] = field(default_factory=list)
    uses: list[Use] = field(default_factory=list)
    trouble: str | None = None  # one of TROUBLES, set by the grader where it knows it (grading.py); never from a message
    departure: list[str] = field(default_factory=list)  # where the computation first departs (diagnose/trace.py)
    unexplained: list[str] = field(default_factory=list)  # failing checks no mistake explains: what the results show


class Trouble(Word):
    """How a problem's grading went wrong beyond its checks' verdicts (the report's `trouble`); set by the grader where
    it sees it happen (run/handle.py stops a worker with one), never read from a message."""

    TIMEOUT = "timeout"
    CRASH = "crash"
    HOSTILE = "hostile"
    NOT_STARTED = "not_started"
    ERROR = "error"


TROUBLES = {  # what went wrong with a problem's grading, beyond its checks' verdicts: the report's `trouble`
    "timeout": "its worker ran past the time limit and was stopped",
    "crash": "its worker process died (a signal, sys.exit or os._exit)",
    "hostile": "its worker sent something that is not one of the grader's messages",
    "not_started": "the module could not be graded at all: a stub, missing, or its import failed",
    "error": "the grader itself failed: its worker never started, or a check failed in the grader's own code",
}


@dataclass
class Report:
    impl: str
    seed: int
    score: float
    max_score: float
    devices: dict
    problems: list[ProblemResult]
    sandbox: str = "process"  # "bubblewrap": graded inside bwrap (jail.py); "process": sandbox.enter alone
    memory: str = "worker"  # "cgroup": memory bounds measured by the grader outside the worker; "worker": inside it
    variant: str | None = None  # the candidate's variant (`--variant NAME`), whose name gave the seed

    def to_json(self) -> dict:
        return asdict(self)

    def problem(self, pid: str) -> ProblemResult:
        return next(p for p in self.problems if p.id == pid)

    @property
    def grader_errors(self) -> int:
        """How many checks the grader itself failed to run (left out of the maximum)."""
        return sum(c.status == "error" for p in self.problems for c in p.checks)
