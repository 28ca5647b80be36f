"""`attnkit grade` on a bundle's submission: the scope the bundle carries (integrations/bundle.py) applied to the
request, and what the interviewer's report shows beyond the grading (its clock, the attempt log, the code)."""
from __future__ import annotations

import sys

from .requests import GradeRequest


def scoped(request: GradeRequest, impl):
    """The request with the bundle's recorded scope (its problems, its variant) where the submission carries one and
    the command line did not choose them; says so. (request, the scope or None)."""
    import dataclasses

    from ..defaults import variant_seed
    from ..integrations.bundle import describe, scope_of
    from ..run.inbox import one_line

    scope = scope_of(impl)
    if scope is None:
        return request, None
    if not scope.verified and request.problems is None:  # the candidate's own list: a problem left out of it, or a
        from ..errors import BadInput  # clock dropped, would vanish from the grade unseen
        raise BadInput(f"{one_line(str(request.impl), 200)} names bundle {scope.bundle[:8]}, whose record is not on "
                       f"this machine ({scope.record}): its problem list comes from the candidate and is not used; "
                       "give --problems (and --variant) as you exported it, or grade where the bundle was exported")
    print(one_line(describe(scope, str(request.impl)), 2000))
    changes = {}
    if request.problems is None:
        changes["problems"] = scope.problems
    if not request.seed_given and scope.variant:
        changes.update(variant=scope.variant, seed=variant_seed(scope.variant))
    if request.problems is not None or request.seed_given:
        print("(--problems, --seed or --variant given: they replace the bundle's)")
    return dataclasses.replace(request, **changes), scope


def report_argv(request: GradeRequest) -> list[str]:
    """The grading command for the report's Reproduce section: as typed, with the bundle's scope made explicit."""
    argv = ["grade", *sys.argv[2:]] if sys.argv[1:2] == ["grade"] else ["grade"]
    if request.problems and "--problems" not in argv:
        argv += ["--problems", ",".join(request.problems)]
    if request.variant and "--variant" not in argv:
        argv += ["--variant", request.variant]
    return argv


def _clock(scope):
    """The interview's clock for the report, from the interviewer's record (None: no record, or no clock)."""
    from ..report.attempts import Clock

    if scope is None or not scope.verified or scope.started is None:
        return None
    return Clock(scope.started, scope.minutes)


def _attempts(impl, report):
    """The attempt log for the interviewer's report: the public checks' runs, as the candidate's machine logged them,
    and the public check id -> problem id map."""
    from ..integrations.public import cases
    from ..problems import get
    from ..report.attempts import read

    known = {c["id"]: p.id for p in map(get, (p.id for p in report.problems)) for c in cases(p)}
    return read(impl, known), known


def report_extras(impl, report, scope):
    """The report's extras (report/interview.py), read from the submission before a zip's folder is removed."""
    from ..report.interview import Extras, sources

    return Extras(attempts=_attempts(impl, report), code=sources(impl, [p.id for p in report.problems]),
                  clock=_clock(scope), scope=_scope_line(scope))


def _scope_line(scope) -> str | None:
    """What the report says of the bundle's scope: read from the interviewer's record, or not (then the command line
    chose the problems, and no clock or variant is known)."""
    if scope is None:
        return None
    if scope.verified:
        return (f"bundle {scope.bundle[:8]}, its problems" + (", variant" if scope.variant else "")
                + (" and clock" if scope.started else "") + " from the interviewer's record")
    return (f"bundle {scope.bundle[:8]} is not recorded on this machine: the problems are those given with --problems, "
            "and no clock or variant of the bundle is known")
