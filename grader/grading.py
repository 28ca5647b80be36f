"""One grading run: fork workers, plan seeded calls, run the reference meanwhile, judge.

The grader's process owns seeds, reference results and every comparison; a worker only
receives inputs and returns tensors.
"""
from __future__ import annotations

import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .judge.checks import CHECKS, validate_checks
from .results import CheckResult, ProblemResult, Report, Status, Trouble, Use, Verdict
from .judge.context import Context, decode, Failed, GraderError, valid_mask
from .judge.expected import Helper, References
from .judge.plan import Plan
from .judge.stored import Store
from .judge.registry import Submission, grader_groups, problem_hooks
from .run.cgroup import reason
from .judge.scan import lazy_imports, refused, scan_problem
from .judge.scan.files import may_import
from .run.jail import decide
from .judge.untouched import NOT_STARTED, untouched

from .run.pool import Pool
from .run.harness import flat_positions
from .run.wire import value_digest
from .errors import BadInput
from .problems import all_problems, available, get, unavailable
from .defaults import DEFAULT_SEED, DEFAULT_TIMEOUT
from .model.i18n import word



def grade(impl, problem_ids=None, seed: int = DEFAULT_SEED, timeout: float = DEFAULT_TIMEOUT, limits=None,
          sandbox: bool | None = None, references: References | None = None, lang: str | None = None) -> Report:
    """Grade the implementation directory `impl`. `sandbox`: run it inside bubblewrap (True: required,
    False: never, None: $ATTNKIT_SANDBOX, by default whenever usable; jail.decide). `references`: the store of
    expected values to use and fill (judge/expected.py); by default the run's own, so a caller that grades the same
    problems again in this process passes one to compute them once. `lang`: the language of the report's texts (None:
    the ambient one, grader/model/i18n.py). Runs torch on one thread meanwhile (small
    tensors: more threads only cost start-up time) and gives the caller back its own setting (a learner's kernel)."""
    jailed = decide(sandbox)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _grade(Path(impl).resolve(), problem_ids, seed, timeout, limits, jailed,
                      references if references is not None else References(), lang)
    finally:
        torch.set_num_threads(threads)


def _grade(impl: Path, problem_ids, seed: int, timeout: float, limits, jailed: bool, references, lang) -> Report:
    chosen = [get(pid, lang) for pid in problem_ids] if problem_ids else available(lang)
    for p in chosen:
        if unavailable(p):
            raise BadInput(f"{p.id}: {unavailable(p)}")
    problems = _with_prerequisites(chosen, lang)  # graded too, so that a failure is blamed on them only when they fail
    for p in problems:
        validate_checks(p)
    scans = {p.id: _scan(impl, p) for p in problems}  # the sources, read here (never imported) before any of it runs
    stubs = [p for p in problems if untouched(impl, p)]  # not started, seen from their text: nothing of them runs
    live = [p for p in problems if p not in stubs]
    if live:
        statuses, cuda = _run(impl, live, stubs, seed, timeout, limits, jailed, references, scans)
    else:
        cuda = torch.cuda.is_available()  # what a worker would have said (the sandbox shows it the GPUs)
        statuses = _stubs_judged(stubs, cuda, jailed, scans)
    results = [statuses[p.id] for p in chosen]
    _note_prerequisites(chosen, results, statuses, scans)
    return Report(
        impl=str(impl), seed=seed,
        score=sum(r.score for r in results), max_score=sum(r.max_score for r in results),
        devices={"cpu": True, "cuda": cuda}, problems=results, sandbox="bubblewrap" if jailed else "process",
        memory="cgroup" if reason() is None else "worker",
    )


def _run(impl: Path, problems, stubs, seed: int, timeout: float, limits, jailed: bool, references, scans):
    """({problem id: result} of the problems run and of the `stubs`, whether CUDA was there): the run's workers and
    plan for `problems`, the stubs judged once the workers have said whether they see a GPU."""
    stored = Store.here(jailed)  # the values earlier runs computed, where no worker can reach them
    if stored is not None:
        stored.load(references, problems, seed)
    helper = Helper(problems, seed, references)  # the expected values, computed side by side from here on
    try:
        with ThreadPoolExecutor(1) as starter:  # the workers are forked while the calls are planned
            starting = starter.submit(Pool, str(impl), {p.id: (p.id, p.symbol, _preload(p, scans[p.id])) for p in problems},
                                      timeout, limits, jailed)
            feed = _Feed(starting)
            try:  # the run's one plan (its CUDA part is added once a worker sees a GPU), each problem's calls fed
                plan = Plan.draw(problems, seed, feed.offer)  # to its worker as soon as both are there
                if stored is not None:
                    stored.forget(references, plan)
                while not starting.done() and helper.compute_next(plan, plan.problems):
                    pass  # the workers' server still imports torch: expected values meanwhile, on the other core
            except BaseException:
                _close_started(starting)  # the planning failed: the pool that started meanwhile is closed, not left
                raise
            pool = starting.result()  # a failed start raises here, after the planning
        try:
            pool.submit_all(feed.waiting)
            pool.wait_hello(idle=lambda: helper.compute_next(plan, plan.problems, pool.poll))  # the sandbox's too
            if any(w.hello and w.hello["cuda"] for w in pool.workers.values()):
                plan = plan.with_cuda()
                pool.submit_more(plan.gpu_batches())  # the CUDA checks' calls follow as a second batch
            answers = _start_answers(impl, plan, limits, timeout, jailed, scans)
            judged = _stubs_judged(stubs, plan.cuda, jailed, scans)  # before the problems that import them
            statuses = _judge_as_answered(plan, pool, helper, answers, scans, jailed, judged)
        finally:
            pool.close()
    finally:
        helper.close()
    if stored is not None:
        stored.save(references, problems, seed)
    return statuses, plan.cuda


def _stubs_judged(stubs, cuda: bool, jailed: bool, scans: dict) -> dict:
    """{problem id: result} of each untouched stub: every check not started, as a run of it would say."""
    out = {}
    for p in stubs:
        checks = [_skipped(CHECKS[cid], cuda, jailed) or CheckResult(cid, CHECKS[cid].title, Verdict.FAILED, 0, points,
                                                                     f"not started: {NOT_STARTED.format(id=p.id)}")
                  for cid, points in p.points.items()]
        out[p.id] = ProblemResult(p.id, p.title, Status.NOT_STARTED, 0, sum(c.max_score for c in checks),
                                  checks, _uses(p, scans[p.id]), trouble=Trouble.NOT_STARTED.value, unexplained=[])
    return out


def _uses(problem, findings) -> list[Use]:
    """The source's findings as the report lists them (none where the reading failed: the check says so)."""
    findings = () if isinstance(findings, str) else findings
    return [Use(f.capability.value, f.file, f.line, f.what, refused(problem, f)) for f in findings]


def _skipped(check, cuda: bool, jailed: bool) -> CheckResult | None:
    """The check's result where it cannot run here (no CUDA device; this machine lacks what it needs), else None."""
    if check.needs_cuda and not cuda:
        return CheckResult(check.id, check.title, Verdict.SKIPPED, 0, 0, "skipped: no CUDA device")
    if check.unavailable is not None and (why := check.unavailable(jailed)):  # this machine, not the submission
        return CheckResult(check.id, check.title, Verdict.SKIPPED, 0, 0, f"skipped: {why}")
    return None


class _Feed:
    """Each problem's calls, handed to its worker as the plan draws them once the pool has started (the workers run
    while the rest is drawn), else kept `waiting` for the pool."""

    def __init__(self, starting):
        self.starting, self.waiting = starting, {}

    def offer(self, pid: str, calls: list[dict]) -> None:
        self.waiting[pid] = calls
        if self.starting.done() and self.starting.exception() is None:
            pool = self.starting.result()
            pool.submit_all(self.waiting)
            self.waiting = {}
            pool.poll()  # hellos read (a sandboxed worker gets its batch once placed in its cgroup)


def _close_started(starting) -> None:
    """Close the pool a starter thread made, if it made one (its own failure is the lesser news)."""
    try:
        starting.result().close()
    except Exception:  # noqa: BLE001 - the planning's error is the one raised
        pass


def _judge_as_answered(plan: Plan, pool, helper, answers, scans: dict, jailed: bool = False,
                       judged: dict | None = None) -> dict:
    """Judge each problem once its worker has answered everything and its expected values are in, its
    prerequisites judged first (their statuses decide whether their mistakes may be named here), while the other
    workers still run. Each judged worker is told to exit. `judged`: the results known before (the stubs')."""
    statuses = dict(judged or {})
    waiting = list(plan.problems)

    def ready():
        helper.receive()
        return next((p for p in waiting if not pool.workers[p.id].busy and helper.ready(p)
                     and not any(r in {q.id for q in waiting} for r in p.requires)), None)

    def worth(p) -> bool:  # a costly problem's expected values are computed once its learner's code is seen to run
        return not costly(p) or _started(pool.workers[p.id])

    while waiting:
        p = ready()
        if p is None and any(pool.workers[q.id].busy for q in waiting):
            if not helper.compute_next(plan, [q for q in waiting if worth(q)], pool.poll):  # our work meanwhile
                held = [q for q in waiting if not worth(q)]  # woken too when one of them turns out started
                pool.run_until(lambda: ready() or any(worth(q) for q in held),
                               wake=[helper.conn] if helper.conn is not None else [])
            continue
        p = p or waiting[0]  # nothing runs any more: its expected values are waited for
        waiting.remove(p)
        refs = helper.get(plan, p, pool.poll) if worth(p) else {}  # a stub: nothing to compare
        for collect in answers.get(p.id, ()):
            pool.workers[p.id].results.update(collect())
        statuses[p.id] = _judge(p, plan, pool.workers[p.id], refs, statuses, scans[p.id], helper.references.variants,
                                probe=_prober(pool, p.id), jailed=jailed,
                                sent=helper.references.sent.setdefault((p.id, plan.seed), {}))
        pool.release(p.id)
    return statuses


def _preload(problem, scan=()) -> list[str]:
    """The modules the problem's worker imports before its sandbox and before its memory is counted: those its hooks
    need (run/hooks/: Triton's), and the parts of torch its source's first calls would import (judge/scan: LAZY)."""
    from .run.hooks import HOOKS

    return [m for name in problem_hooks(problem) for m in HOOKS[name].preload] + lazy_imports(scan)


def costly(problem) -> bool:
    """A problem whose every call is slow (a worker hook on all of them, run/hooks/: a kernel interpreted)."""
    from .run.hooks import HOOKS

    return any(HOOKS[name].heavy for name in problem_hooks(problem))


def _started(worker) -> bool:
    """Has the learner's code answered a call with anything but NotImplementedError (a stub's)? Its worker done
    without one: not started (its module failed to load, or every call raised the stub's error, or could not be
    bound to its signature: the body never ran)."""
    return any(r.get("ok") or (r.get("error") or {}).get("type") not in ("NotImplementedError", "SignatureError")
               for r in worker.results.values())


TRACE_SECONDS = 10.0
"""The time a traced call (diagnose/trace.py) may take in the worker, once its problem is judged."""


def _prober(pool, pid: str):
    """A function running more calls in the problem's worker after its verdict (the stage trace, the calls drawn
    again past a crash): their raw results, each None where the worker is gone, takes no more or runs past
    TRACE_SECONDS. The verdict is decided before: what happens to the worker here changes no grade."""
    def probe(calls: list[dict]) -> list:
        w = pool.workers[pid]
        if w.proc is None or w.failure is not None or w.stop_sent or w.busy:
            return [None] * len(calls)
        w.deadline = time.monotonic() + TRACE_SECONDS
        w.submit(calls)
        pool.run_until(lambda: not w.busy)
        return [w.results.get(c["key"]) if w.failure is None else None for c in calls]
    return probe


def _scan(impl, problem):
    """The findings of the problem's source (judge/scan/), or the reader's failure as text: the capabilities check
    then cannot be judged, which fails it (the source it read is the learner's) and says the grader failed."""
    try:
        return scan_problem(impl, problem)
    except Exception:  # noqa: BLE001 - the capabilities check's result: not judged
        return traceback.format_exc().strip()


def _with_prerequisites(chosen, lang=None) -> list:
    """The chosen problems and every problem they import, in track order (prerequisites first)."""
    ids = {p.id for p in chosen}
    ids |= {r for p in chosen for r in p.requires}
    return [p for p in all_problems(lang) if p.id in ids]


def _start_answers(impl, plan: Plan, limits, timeout, jailed, scans) -> dict:
    """{problem id: [collect]}: the checks that answer their own calls (judge/registry.Check.answer), started now,
    each collected when its problem is judged."""
    out = {}
    for p in plan.problems:
        submission = Submission(impl, limits, timeout, jailed, scans[p.id])
        for cid in p.points:
            check = CHECKS[cid]
            if check.answer is not None:
                cases = {k: c for k, c in plan.cases(p).items() if c.builder in check.groups}
                out.setdefault(p.id, []).append(check.answer(p, cases, submission))
    return out


def _not_started(problem, worker, cases, answers) -> str | None:
    if worker.loaded:
        return worker.loaded
    ours = grader_groups()
    results = [r for k, r in answers.items() if k in cases and cases[k].builder not in ours and r is not None]
    if results and all(not r.ok and r.error is not None and r.error.type in ("NotImplementedError", "SignatureError")
                       for r in results) and any(r.error.type == "NotImplementedError" for r in results):
        return NOT_STARTED.format(id=problem.id)
    return None


def _inputs_changed(cases, answers, sent: dict) -> None:
    """Side effects decided here, not in the worker: each call's inputs as the worker holds them after the call
    (their digests, wire.value_digest), compared with the inputs the grader sent (a worker's own "changed" is never
    believed). `sent`: {case key: the digests of what was sent}, filled here where missing; it depends on the plan
    alone, so the store keeps it with the expected values (judge/stored.py) and a run that finds it hashes nothing."""
    for key, res in answers.items():
        case = cases.get(key)
        if case is None or res is None or not res.has_outputs:
            continue
        after, res.inputs = res.inputs or [], None
        if key not in sent:
            sent[key] = _sent_digests(case.call)
        changed = []
        for at, (i, digest) in enumerate(sent[key]):  # a tuple argument (a cache) counts as changed if any part is
            if digest is None or i in changed:
                continue
            if at >= len(after) or after[at] != digest:
                changed.append(i)
        res.changed = changed


def _sent_digests(call: dict) -> list:
    """[(argument position, digest or None: not a tensor)] for each tensor or other value the call sends, a tuple
    argument's parts each in turn (as the worker lists its inputs after the call)."""
    return [(i, value_digest(t) if isinstance(t, torch.Tensor) else None) for i, t in flat_positions(call.get("args", []))]


def _judge(problem, plan: Plan, worker, refs, statuses: dict, findings=(), memo=None, probe=None,
           jailed: bool = False, sent: dict | None = None) -> ProblemResult:
    cases, cuda = plan.cases(problem), plan.cuda
    answers = decode(problem, cases, worker.results)  # typed once, here: run/answer.Answer
    _inputs_changed(cases, answers, {} if sent is None else sent)
    findings = () if isinstance(findings, str) else findings  # the reading failed: its text (the check says so)
    failing_deps = tuple(r for r in problem.requires if may_import(findings, r)
                         and getattr(statuses.get(r), "status", None) in (Status.FAILED, Status.NOT_STARTED))
    ctx = Context(problem, cases, answers, refs, worker.failure, plan.seed, failing_deps, worker.fault, memo)
    not_started = _not_started(problem, worker, cases, answers)
    # Once the worker has said hello, the learner's code has run (its module is loaded next, then its calls): from
    # then on, whatever makes a check unjudgeable may be the learner's doing, so it fails the check, never lowering
    # the maximum. Before that (the worker never started: worker.fault), the grader's failure stays its own.
    learner_ran = worker.hello is not None and not worker.fault
    checks = []
    for cid, points in problem.points.items():
        check = CHECKS[cid]
        skipped = _skipped(check, cuda, jailed)
        if skipped is not None:
            checks.append(skipped)
        elif not_started:
            checks.append(CheckResult(cid, check.title, Verdict.FAILED, 0, points, f"not started: {not_started}"))
        else:
            checks.append(_run_check(check, ctx, points, learner_ran))
    failing = [c for c in checks if c.status == Verdict.FAILED and CHECKS[c.id].diagnose] if not not_started else []
    unexplained = _name_mistakes(problem, ctx, failing) if failing else []
    ran = [c for c in checks if c.status not in (Verdict.SKIPPED, Verdict.ERROR)]
    score, max_score = sum(c.score for c in ran), sum(c.max_score for c in ran)
    status = Status.NOT_STARTED if not_started else Status.PASSED if all(c.status == Verdict.PASSED for c in ran) \
        else Status.FAILED
    if status == Status.PASSED and any(c.status == Verdict.ERROR for c in checks):
        status = Status.FAILED  # nothing the learner did is wrong, but the problem was not fully graded
    result = ProblemResult(problem.id, problem.title, status, score, max_score, checks, _uses(problem, findings),
                           trouble=_trouble(worker, bool(not_started), checks), unexplained=unexplained)
    if failing and probe is not None:  # after the verdict, which nothing here changes
        result.departure = _departure(problem, ctx, probe)  # said once per problem (report/feedback.py)
    return result


def _departure(problem, ctx, probe) -> list[str]:
    """Where the learner's computation first departs from the reference's (diagnose/trace.py), and what its code does
    past the calls it raised on (diagnose/reprobe.py), or []."""
    from .diagnose import trace

    from .diagnose import reprobe

    try:
        case = trace.pick(problem, ctx)
        lines = trace.finding(problem, ctx, case, probe([trace.call_for(case)])[0]) if case is not None else []
        return lines + reprobe.finding(problem, ctx, probe)
    except Exception:  # noqa: BLE001 - the trace is feedback only: a bug of its own must never change a grade
        tail = traceback.format_exc().strip().splitlines()[-1]
        return [f"(the trace of your computation failed internally: {tail}; please report it)"]


def _trouble(worker, not_started: bool, checks) -> str | None:
    """The problem's trouble (results.Trouble), decided here from the worker's state as the grader saw it
    (`worker.end`, set by run/handle.py where it stopped the worker), never from a message."""
    if worker.failure is not None and worker.fault:  # it stopped before its hello: no learner code had run
        return Trouble.ERROR.value
    end = worker.end
    if end is Trouble.HOSTILE:
        return end.value
    if not_started:  # a worker that reported a failed import exits on its own: no crash of its
        return Trouble.NOT_STARTED.value
    if end is not None and any(c.status in (Verdict.FAILED, Verdict.ERROR) for c in checks):  # the end cost the learner a result
        return end.value
    if any(c.status == Verdict.ERROR for c in checks):
        return Trouble.ERROR.value
    return None


def _name_mistakes(problem, ctx, failing) -> list[str]:
    """Each failing check's mistake (CheckResult.mistake), where one explains it; for the checks none explains, the
    problem's one note (ProblemResult.unexplained): that none does, and what the results show. Both are said once
    per problem by the reports (report/feedback.py)."""
    from .diagnose.diagnose import describe, diagnose
    from .diagnose.symptoms import evidence  # each check's own (judge/registry.Check.evidence), joined

    try:
        named = diagnose(problem, ctx, failing)
    except Exception:  # noqa: BLE001 - a diagnosis bug must never change a grade
        tail = traceback.format_exc().strip().splitlines()[-1]
        return [f"(the mistake diagnosis failed internally: {tail}; please report it)"]
    for c in failing:
        c.mistake = named.get(c.id)
    if all(c.mistake is not None for c in failing):
        return []
    try:  # the evidence is said where no mistake is named: its own failure must not cost the names found
        seen = evidence(problem, ctx)
    except Exception:  # noqa: BLE001
        seen = [f"(the evidence could not be read: {traceback.format_exc().strip().splitlines()[-1]}; please report it)"]
    return [describe(problem, None)] + ([f"{word('shows', problem.lang)}: " + "; ".join(seen) + "."] if seen else [])


def _evidence(ctx, case) -> dict | None:
    """The learner's and the reference's weights for the failing call, where both exist and agree in shape."""
    if case is None or case.key not in ctx.ref:
        return None
    got, at = ctx.got.get(case.key), ctx.problem.weights_index
    if not got or not got.has_outputs or at is None:
        return None
    w, ref = got.outputs[at], ctx.ref[case.key].outputs[at]
    if w.shape != ref.shape:
        return None
    return {"got": w, "expected": ref, "mask": valid_mask(ctx.problem, case).expand(ref.shape)}


def _note_prerequisites(problems, results, graded, scans) -> None:
    """A failure may come from a module this problem imports: say so where its source does import it and that one
    fails or is not started (a solution that does not import it is told nothing of it)."""
    status = {pid: r.status for pid, r in graded.items()}
    for problem, result in zip(problems, results):
        broken = [r for r in problem.requires if status.get(r) in (Status.FAILED, Status.NOT_STARTED)
                  and may_import(scans.get(problem.id), r)]
        if result.status != Status.FAILED or not broken:
            continue
        why = "is not started" if status[broken[0]] == Status.NOT_STARTED else "fails its own checks"
        note = (f"\nNote: {problem.id} imports your {', '.join(broken)}, which {why}; "
                f"fix {broken[0]} first, then grade this again.")
        for c in result.checks:
            if c.status == Verdict.FAILED:
                c.message += note


def _run_check(check, ctx, points, learner_ran: bool = False) -> CheckResult:
    try:
        check.judge(ctx)
    except Failed as exc:
        try:
            evidence = _evidence(ctx, exc.case)
        except Exception:  # noqa: BLE001 - the plots' evidence is optional; the verdict stands without it
            evidence = None
        symptom = exc.symptom if exc.symptom in check.names else None  # only the names the check declares
        return CheckResult(check.id, check.title, Verdict.FAILED, 0, points, str(exc), evidence=evidence, symptom=symptom)
    except Exception as exc:  # noqa: BLE001 - a grader bug must show, and a learner must never profit from it
        detail = str(exc) if isinstance(exc, GraderError) else traceback.format_exc().strip()
        if learner_ran:  # possibly the learner's doing (odd results): a failure, never a smaller maximum
            return CheckResult(check.id, check.title, Verdict.FAILED, 0, points, UNJUDGED.format(points=points, detail=detail))
        return CheckResult(check.id, check.title, Verdict.ERROR, 0, 0, GRADER_ERROR.format(points=points, detail=detail))
    return CheckResult(check.id, check.title, Verdict.PASSED, points, points)


GRADER_ERROR = ("grader error: the grader failed on this check, not your code; its {points} points are left out of "
                "your maximum. Please report it (attnkit's issue tracker), with this message:\n{detail}")
UNJUDGED = ("the grader could not judge this check on what your code returned, so it counts as failed (0 of its "
            "{points} points). If your code returns what the contract asks (tensors of the inputs' dtype and the "
            "expected shapes), please report it (attnkit's issue tracker), with this message:\n{detail}")
