"""What a grading run produces, per check, per problem and in all: leaf types every layer may use."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class CheckResult:
    id: str
    title: str
    status: str  # passed | failed | skipped | error
    score: float
    max_score: float
    message: str = ""
    mistake: str | None = None
    evidence: dict | None = field(default=None, repr=False)  # the failing call's weights (for plots), not in JSON
    symptom: str | None = field(default=None, repr=False)  # a mistake id the check's own evidence shows (diagnose.py)


@dataclass
class Use:
    """What the submission's source refers to that the grader enforces the contract against (judge/static_scan.py),
    read without running it: listed for the interviewer; `refused` where this problem's contract refuses it."""
    capability: str  # a judge.static_scan.Capability value
    file: str  # the module, e.g. "flash_attention.py" (a sibling it imports, too)
    line: int
    what: str  # the grader's own words, never the learner's text
    refused: bool = False


@dataclass
class ProblemResult:
    id: str
    title: str
    status: str  # passed | failed | not_started
    score: float
    max_score: float
    checks: list[CheckResult] = field(default_factory=list)
    uses: list[Use] = field(default_factory=list)


@dataclass
class Report:
    impl: str
    seed: int
    score: float
    max_score: float
    devices: dict
    problems: list[ProblemResult]
    sandbox: str = "process"  # "bubblewrap": graded inside bwrap (jail.py); "process": sandbox.enter alone
    variant: str | None = None  # the candidate's variant (`--variant NAME`), whose name gave the seed

    def to_json(self) -> dict:
        return asdict(self)

    def problem(self, pid: str) -> ProblemResult:
        return next(p for p in self.problems if p.id == pid)

    @property
    def grader_errors(self) -> int:
        """How many checks the grader itself failed to run (left out of the maximum)."""
        return sum(c.status == "error" for p in self.problems for c in p.checks)
