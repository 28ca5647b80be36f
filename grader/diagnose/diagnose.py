"""Recognise which catalogued mistake a failing check shows.

1. By symptoms (grader/diagnose/symptoms.py), first: what a check's own evidence shows (dropout with
   the wrong p, torch imported), the kind of parameter difference (an extra or a missing
   bias, a weight on the wrong side), and error shapes whose cause is certain (NaN or uniform
   rows with no allowed key while the rest is right, rows lost only where every valid score
   is very negative, chunks normalised apart, sums over the wrong axis, float32 rounding
   inside a float64 computation).
2. By reproduction: each catalogued mistake is a small patch of the reference. The patched
   reference runs (in the grader's process) on the very calls the learner's code got; a
   mistake is named when it reproduces the learner's results on every call of the check,
   on at least one call where the learner and the reference differ. For a module, the
   mistakes of a problem it imports (masked_softmax) are tried too, as `masked_softmax:<id>`,
   but only when the learner's module imports it (the source scan says so) and it fails its own checks.
Where neither names one, the check says so, with what the results show, rather than guessing.
"""
from __future__ import annotations

import functools
import re
import warnings

import torch

from ..judge.checks import CHECKS
from ..judge.registry import check_cases, general_cases
from ..judge.compare import tolerance, usage
from .. import solution_path
from ..judge.reference import reference_like
from ..run.answer import Answer
from ..run.harness import execute
from ..model.i18n import word
from .mistakes import apply
from . import symptoms
from ..problems import get
from ..draw.scenarios import as_reference
from ..model.spec import Mistake

def _variant(problem, mistake: Mistake, dependency=None):
    """The reference with `mistake` applied (to the problem itself, or to the dependency it imports)."""
    return _variant_module(problem.id, mistake.id, dependency)


@functools.lru_cache(maxsize=None)
def _variant_module(pid: str, mid: str, dependency: str | None):
    """The mistaken reference's module, built once per process: a pure function of the reference's source."""
    problem = get(pid, "en")
    mistake = next(m for m in get(dependency or pid, "en").mistakes if m.id == mid)
    source = solution_path(pid).read_text()
    module = reference_like(problem, source if dependency else apply(source, mistake), f"<attnkit mistake {pid}:{mid}>",
                            f"_mistake_{pid}_{dependency}_{mid}", hooks_of=get(dependency or pid, "en"))
    if dependency:  # the module's own code, calling the dependency's mistaken version
        dep = get(dependency, "en")
        setattr(module, dep.symbol, getattr(_variant_module(dependency, mid, None), dep.symbol))
    return module


def candidates(problem, failing_deps=()):
    """(reported id, Mistake, target) for the problem's own mistakes, then those of the imported problems
    that fail their own checks."""
    out = [(m.id, m, lambda m=m: getattr(_variant(problem, m), problem.symbol)) for m in problem.mistakes]
    for dep in failing_deps:
        out += [(f"{dep}:{m.id}", m, lambda m=m, dep=dep: getattr(_variant(problem, m, dep), problem.symbol))
                for m in get(dep).mistakes]
    return out


def _tol(case, key=None):
    if case.tol is not None:
        return case.tol
    return tolerance(case.call.get("dtype") or "float64", grad=bool(key))


def same(case, a: Answer | None, b: Answer | None) -> bool | None:
    """Do two results of one call agree? None when both raised (agreement too weak to count)."""
    if a is None or b is None:
        return False
    if not a.ok or not b.ok:
        if not a.ok and not b.ok:  # the same exception, same message: reproduced; else too weak to count
            ea, eb = a.error, b.error
            return True if ea is not None and eb is not None and (ea.type, ea.message) == (eb.type, eb.message) else None
        return False
    if not a.runs:  # construct-only calls
        return a.params == b.params
    if a.changed != b.changed:
        return False
    if _over(case, a) != _over(case, b):  # memory: both within the bound, or both over it by the same tensor (over
        return False  # by another one, a full boolean mask against full float scores, reproduces closely at best)
    if _over(case, a) and _peak(a) != _peak(b):
        return False
    if any(c.measure(case, a) != c.measure(case, b) for c in CHECKS.values() if c.measure is not None):
        return False  # what a check measures of the call beside its values (a kernel's memory traffic)
    runs = zip(a.runs, b.runs)
    for run_a, run_b in runs:
        pairs = list(zip(run_a, run_b))
        if case.call.get("train"):
            pairs = pairs[-1:]  # dropout draws differ: compare the (pre-dropout) weights only
        for x, y in pairs:
            if x.shape != y.shape or not _close(x, y, _tol(case)):
                return False
    for key, g in (a.grads or {}).items():
        h = (b.grads or {}).get(key)
        if (g is None) != (h is None) or (g is not None and (g.shape != h.shape or not _close(g, h, _tol(case, key)))):
            return False
    return True


def _close(x, y, tol) -> bool:
    x, y = x.to(torch.float64), y.to(torch.float64)
    if bool(torch.isfinite(x).all()) and bool(torch.isfinite(y).all()):  # the usual case, at a third of the cost
        return usage(x, y, tol) <= 1.0
    finite = torch.isfinite(x) & torch.isfinite(y)
    if not torch.equal(torch.isfinite(x), torch.isfinite(y)) or not torch.equal(torch.isnan(x), torch.isnan(y)):
        return False
    if not torch.equal(x[torch.isinf(x)], y[torch.isinf(y)]):  # +inf where -inf is expected is another result
        return False
    return usage(x[finite], y[finite], tol) <= 1.0


def _ctor_error_result(res):
    """A ctor_error call compares by outcome: accepted, ValueError, or another error: of which type, with which message
    (a variant that crashes elsewhere for a reason of its own, a shape clash of other sizes, explains nothing)."""
    if res is None:
        return None
    if res.ok:
        return "accepted"
    if res.error is not None and res.error.value_error:
        return "ValueError"
    if res.error is None:
        return "other: ?"
    return f"other: {res.error.type}: {re.sub(r'0x[0-9a-fA-F]+', '0x', res.error.message or '')}"


def diagnose(problem, ctx, failing_checks) -> dict[str, str | None]:
    """For each failing check (CheckResult): the id of the mistake that explains it, or None.

    A parameter difference of a catalogued kind explains every failing check. Otherwise a check's own
    symptom names that check; then exact reproduction; then an error shape whose cause is certain; then
    reproduction that explains the calls the learner got wrong (it may differ on calls they got right).
    A mistake is reproduced on a check when, on every call where the learner's result differs from the
    reference's, the mistaken variant gives the learner's result. A mistake that explains every failing
    check is named for all of them; otherwise each check gets its own."""
    failing = [c.id for c in failing_checks]
    by_params = _parameter_mistake(problem, ctx)
    if by_params:
        return {cid: by_params for cid in failing}
    ids = symptoms.known_ids(problem, ctx.failing_deps)
    reproduced = _reproduce(problem, ctx, failing)
    shape, confirm = symptoms.certain(problem, ctx, failing)
    if shape and ((confirm and not _confirmed(problem, ctx, failing, shape)) or _contradicted_by(problem, ctx, shape)):
        shape = None
    found = {}
    for c in failing_checks:
        rid, exact = reproduced.get(c.id, (None, False))
        if c.symptom in ids:
            found[c.id] = c.symptom
        elif rid and exact:
            found[c.id] = rid
        elif c.symptom is not None:  # the check saw what is wrong (its own symptom), which the catalogue lacks: only
            found[c.id] = None  # an exact reproduction may name it, never a mistake that merely comes close
        else:
            found[c.id] = shape or rid
    return found


def _reproduce(problem, ctx, failing) -> dict:
    """{check id: (mistake id, exact)} for the checks some catalogued variant reproduces."""
    cache = ctx.memo.setdefault((problem.id, ctx.seed), {})  # variants are deterministic: reuse across runs
    cases = {cid: _check_cases(ctx, cid) for cid in failing}
    scores = {
        rid: {cid: _explains(ctx, cases[cid], rid, target, cache) for cid in failing}
        for rid, _, target in candidates(problem, ctx.failing_deps)
    }
    whole = [
        ((all(s[c][0] for c in failing), sum(s[c][1] for c in failing)), rid)
        for rid, s in scores.items() if all(s[c] is not None for c in failing)
    ]
    base = general_cases(ctx, problem)
    targets = {rid: target for rid, _, target in candidates(problem, ctx.failing_deps)}
    whole = [w for w in whole if not _contradicted(ctx, base, w[1], targets[w[1]], cache)]
    if whole:
        (exact, _), best = max(whole, key=lambda t: t[0])  # max keeps catalogue order on ties
        return {cid: (best, exact) for cid in failing}
    found = {}
    reach = {rid: sum(s[c] is not None for c in failing) for rid, s in scores.items()}
    for cid in failing:
        # one check's own explanation must not be refuted by the general calls: a variant that misses one of
        # the learner's wrong base results is another mistake, however well it fits this check alone; among those
        # left, the one that explains more of the failing checks first (one mistake per problem where one does)
        options = [((s[cid][0], reach[rid], s[cid][1]), rid) for rid, s in scores.items() if s[cid] is not None
                   and (CHECKS[cid].explained_alone or not (_refuted(ctx, base, rid, targets[rid], cache)
                                                             or _contradicted(ctx, base, rid, targets[rid], cache)))]
        if options:
            (exact, _, _), rid = max(options, key=lambda t: t[0])
            found[cid] = (rid, exact)
    return found


def _confirmed(problem, ctx, failing, rid) -> bool:
    """Does the mistake's variant go wrong on the general calls the learner gets wrong, with the learner's values
    (at least closely) wherever both return some? A variant may crash where the learner's code returns wrong values
    (a crude patch of the same mistake), but values of its own are another mistake."""
    cache = ctx.memo.setdefault((problem.id, ctx.seed), {})
    target = next((t for r, _, t in candidates(problem, ctx.failing_deps) if r == rid), None)
    if target is None:
        return False
    for case in general_cases(ctx, problem):
        got, ref = ctx.got.get(case.key), ctx.ref.get(case.key)
        if got is None or ref is None or same(case, got, ref):
            continue
        variant = _run_variant(case, rid, target, cache)
        if same(case, variant, ref):
            return False
        if got.has_outputs and variant.has_outputs and not same(case, got, variant) \
                and not _close_to(got, variant, ref):
            return False
    return True


def _contradicted_by(problem, ctx, rid) -> bool:
    """Is every general call of the learner's right while the mistake's variant gets one wrong? An error shape is then
    shared by another mistake (rows lost where every score is very negative: a fill of 0, or an exp that underflows)."""
    target = next((t for r, _, t in candidates(problem, ctx.failing_deps) if r == rid), None)
    cache = ctx.memo.setdefault((problem.id, ctx.seed), {})
    return target is not None and _contradicted(ctx, general_cases(ctx, problem), rid, target, cache)


def _refuted(ctx, base, rid, target, cache) -> bool:
    """Does the variant miss a base call the learner got wrong?"""
    wrong = [c for c in base if c.key in ctx.got and not same(c, ctx.got[c.key], ctx.ref[c.key])]
    return bool(wrong) and _explains(ctx, wrong, rid, target, cache) is None


def _contradicted(ctx, base, rid, target, cache) -> bool:
    """Is every general call of the learner's right, while the variant gets one wrong? Then the failing checks show
    another mistake (inputs detached: every value right, the gradients missing, which a variant that drops the last
    block also loses)."""
    answered = [(c, ctx.got.get(c.key), ctx.ref.get(c.key)) for c in base]
    if not answered or any(g is None or r is None or not g.ok or g.rejected or same(c, g, r) is not True
                           for c, g, r in answered):
        return False
    return any(same(c, _run_variant(c, rid, target, cache), r) is False for c, _, r in answered)


def _parameter_mistake(problem, ctx) -> str | None:
    """The one catalogued mistake whose variant has the same kinds of parameter difference as the learner's
    module, over every constructor call (e.g. an extra bias, wherever it sits)."""
    cases = [c for c in ctx.cases.values() if c.call.get("construct") and not c.must_raise
             and (r := ctx.got.get(c.key)) and r.ok and r.params is not None]
    if not cases:
        return None

    def kinds(params_of):
        out = set()
        for case in cases:
            expected = {n: list(s) for n, s in problem.params({**case.cfg, **case.variant}).items()}
            params = params_of(case)
            if params is None:
                return None
            out |= symptoms.parameter_kinds(params, expected)
        return out

    learner = kinds(lambda case: ctx.got[case.key].params)
    if not learner:
        return None
    cache = ctx.memo.setdefault((problem.id, ctx.seed), {})
    matches = []
    for rid, _, target in candidates(problem):
        def variant_params(case, rid=rid, target=target):
            res = _run_variant(case, rid, target, cache)
            return res.params if res.ok else None

        if kinds(variant_params) == learner:
            matches.append(rid)
    return matches[0] if len(matches) == 1 else None


def _check_cases(ctx, cid):
    """The check's cases whose results a variant's can be compared with: not a backstop that compares sampled rows
    (its expected values are those rows'; the small memory calls carry the same evidence)."""
    return [c for c in check_cases(ctx, cid) if "rows" not in c.meta]


def _over(case, answer) -> bool | None:
    """Did a measured call allocate past its memory bound? None where it was not measured (the reference's expected
    values come from an unmeasured run: it counts as within the bound)."""
    if "allowed" not in case.meta:
        return None
    elements = (answer.extra.get("peak") or {}).get("elements")
    return elements is not None and elements > case.meta["allowed"]


def _peak(answer):
    """The element count of the largest tensor a measured call allocated (None where not measured)."""
    return (answer.extra.get("peak") or {}).get("elements")


def _run_variant(case, rid, target, cache):
    key = (rid, case.key)
    if key not in cache:
        try:
            call = case.call if case.call.get("device", "cpu") == "cpu" else as_reference(case.call)  # its own dtype
            with warnings.catch_warnings():  # a mistaken NumPy variant overflows on purpose
                warnings.simplefilter("ignore")
                cache[key] = Answer.of({"ok": True, **execute(call, target())})
        except Exception as exc:  # noqa: BLE001 - a mistaken variant may raise, like the learner's code
            cache[key] = Answer.of({"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)[:500],
                                                 "value_error": isinstance(exc, ValueError)}})
    return cache[key]


def _explains(ctx, cases, rid, target, cache) -> tuple[bool, int] | None:
    """(exact, evidence): the variant reproduces each call the learner got wrong (evidence counts
    them; 0 means nothing to explain), within tolerance or closely (`_close_to`); exact when it agrees
    within tolerance on every call, right or wrong. None when it misses one of the learner's wrong results."""
    if any(ctx.got.get(case.key) is None for case in cases):
        return None
    # the learner's wrong calls first: a variant that misses one is refused before it runs on the others (the verdict
    # is the same in any order; a grading of wrong code tries every catalogued mistake, most of them on no other call)
    cases = sorted(cases, key=lambda case: not _wrong(ctx, case, ctx.got[case.key]))
    evidence, broken, exact = 0, 0, True
    for case in cases:
        got = ctx.got[case.key]
        variant = _run_variant(case, rid, target, cache)
        if not case.must_raise and not got.ok and got.error is not None and same(case, got, variant) is not True:
            continue  # the learner's code crashed on a call the contract allows (and the variant does not crash the
            # same way): a finding of its own, in the check's message, which says nothing of the values elsewhere
        wrong = _wrong(ctx, case, got)
        if case.must_raise:
            agree = _ctor_error_result(got) == _ctor_error_result(variant)
        else:
            agree = same(case, got, variant)
            agree = agree and _dtypes(got) == _dtypes(variant) if agree is not None else None
        if wrong and not agree:  # close values explain nothing where the side effects or the dtypes differ
            if case.must_raise or bool(got.changed) != bool(variant.changed) or _dtypes(got) != _dtypes(variant) \
                    or _over(case, got) != _over(case, variant) or (_over(case, got) and _peak(got) != _peak(variant)) \
                    or not _close_to(got, variant, ctx.ref.get(case.key)):
                return None
            agree, exact = True, False  # reproduced closely, not exactly
        evidence += bool(wrong and agree)
        broken += bool(not wrong and agree is False)
        exact &= bool(agree) or agree is None
    if broken > evidence:  # the variant gets more of the learner's right calls wrong than it explains wrong ones:
        return None  # another mistake, which happens to fall on the same calls
    return (exact, evidence) if evidence else None


def _wrong(ctx, case, got) -> bool:
    """Is the learner's result of this call wrong (a must-raise call accepted, or values, side effects or dtypes off
    the reference's)? The same for every variant tried: computed once per judging run (ctx.scratch)."""
    key = ("wrong", case.key)
    if key not in ctx.scratch:
        if case.must_raise:
            wrong = _ctor_error_result(got) != "ValueError"
        else:
            expected, dtypes = ctx.ref.get(case.key), _dtypes(got)
            want = case.call.get("dtype", "float64")  # None: the call lets the function choose (judged by its check)
            off_dtype = dtypes is not None and want is not None and dtypes != [want] * len(dtypes)
            if expected is None and not case.reference:  # a call judged without values (half on the CPU): its dtype
                wrong = bool(got is not None and got.ok and off_dtype)
            else:
                wrong = expected is None or not same(case, got, expected) or off_dtype
        ctx.scratch[key] = wrong
    return ctx.scratch[key]


CLOSE = 0.01
"""Close reproduction: the variant's distance to the learner's result is at most this fraction of the
reference's, on every output (the learner's mistake is written differently, e.g. with another fill value)."""


def _close_to(got, variant, expected) -> bool:
    """The variant comes close to the learner's wrong result: on every output and gradient, where the learner's is
    right the variant's is right too, and where it is wrong the variant lies within CLOSE of the learner's distance to
    the reference. (A variant wrong where the learner is right explains nothing: code whose outputs are right and whose
    gradients are wrong is not a mistake that changes the outputs.)"""
    if not (got and variant and expected and got.has_outputs and variant.has_outputs):
        return False
    tol = tolerance("float64")
    if not (len(got.runs) == len(variant.runs) == len(expected.runs)):
        return False
    pairs = [p for g, v, e in zip(got.runs, variant.runs, expected.runs) for p in zip(g, v, e)]  # every run of the call
    grads, vgrads, egrads = got.grads or {}, variant.grads or {}, expected.grads or {}
    if set(grads) != set(vgrads) or any((grads[k] is None) != (vgrads[k] is None) for k in grads):
        return False
    pairs += [(grads[k], vgrads[k], egrads[k]) for k in grads if grads[k] is not None and egrads.get(k) is not None]
    for g, v, e in pairs:
        if g.shape != v.shape or g.shape != e.shape or not (torch.isfinite(g).all() and torch.isfinite(v).all()):
            return False
        to_reference = usage(g, e, tol)
        if to_reference <= 1:
            if usage(v, e, tol) > 1:
                return False
        elif usage(g, v, tol) > CLOSE * to_reference:
            return False
    return True


def _dtypes(res) -> list[str] | None:
    if not res or not res.has_outputs:
        return None
    return [str(o.dtype).replace("torch.", "") for o in res.outputs]


def describe(problem, rid: str | None) -> str:
    """The teaching text for a recognised mistake id (or the honest 'nothing matches'), in the language of
    `problem`'s texts."""
    lang = problem.lang
    if rid is None:
        return word("nothing", lang)
    owner, _, mid = rid.rpartition(":")
    source = get(owner, lang) if owner else get(problem.id, lang)
    m = next(x for x in source.mistakes if x.id == mid)
    where = f" ({word('imported', lang, owner=owner, pid=problem.id)})" if owner else ""
    return (f"{word('mistake', lang)} [{rid}]: {m.name}{where}.\n  {word('why', lang)}: {m.explain}\n"
            f"  {word('fix', lang)}: {m.hint}")
