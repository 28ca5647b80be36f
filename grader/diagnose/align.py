"""Align two traces of one call (run/hooks/trace.py): which of the reference's tensors the learner's computation also
forms, up to layout, and where it first departs.

A reference record is matched when some learner record has the same fingerprint within the tolerance of the
reference record's dtype (`loose`: within float32's, for a float64 call). It is fine when matched or when a record computed
from it is (the learner reached a later stage another way: the reference's row max is no stage of an `F.softmax`).
The departure is the first record that is not fine while every record it is computed from is, constants (records
that depend on no input) last; where a record matches only loosely in a float64 call, rounding at float32 level
starts there, and that comes first.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..run.hooks.trace import DIMS, WIDTH
from ..run.inbox import one_line

RTOL = {64: 1e-9, 128: 1e-9, 32: 2e-5, 96: 2e-5, 16: 2e-3, -16: 1.6e-2}
LOOSE = 2e-5
STATS = slice(5, WIDTH)  # min, max, mean, mean |x|, mean x^2, then the order statistics
SQUARE = 9  # mean x^2: compared at the scale squared
MAX_RECORDS = 1200
"""The most records a worker's trace may hold (twice what the grader asks for): alignment costs R x G, and a hostile
worker could otherwise send millions."""


@dataclass(frozen=True)
class Trace:
    prints: torch.Tensor  # (R, WIDTH) float64
    metas: torch.Tensor  # (R, 2 + DIMS) int64: dtype code, ndim, sizes
    ops: list[str]
    parents: list[list[int]]

    @classmethod
    def decode(cls, raw) -> "Trace | None":
        """A worker's trace, checked (it is the learner's data): None where anything is off."""
        try:
            prints, metas, ops, parents = raw["prints"], raw["metas"], raw["ops"], raw["parents"]
            n = prints.shape[0]
            ok = (n <= MAX_RECORDS and prints.dtype == torch.float64 and prints.shape == (n, WIDTH) and metas.dtype == torch.int64
                  and metas.shape == (n, 2 + DIMS) and len(ops) == n == len(parents)
                  and all(isinstance(o, str) for o in ops)
                  and all(isinstance(p, list) and all(type(i) is int and -1 <= i < k for i in p) for k, p in enumerate(parents)))
        except (KeyError, TypeError, AttributeError):
            return None
        if not ok:
            return None
        return cls(prints, metas, [one_line(o, 80) for o in ops], parents)

    @classmethod
    def probe(cls, prints: torch.Tensor, label: str) -> "Trace":
        """Records of fingerprints alone, (N, WIDTH) (a returned tensor's, an input's): no operator, no parents, to be
        compared with a traced computation by `distance`."""
        n = len(prints)
        return cls(prints, torch.zeros(n, 2 + DIMS, dtype=torch.int64), [label] * n, [[] for _ in range(n)])

    def shape(self, i: int) -> tuple[int, ...]:
        return tuple(d for d in self.metas[i, 2:].tolist() if d >= 0)

    def dtype(self, i: int) -> int:
        return int(self.metas[i, 0])


def scale(prints: torch.Tensor) -> torch.Tensor:
    """(R,) the magnitude each record's entries are compared at."""
    return prints[:, 5:7].abs().amax(dim=1).clamp_min(1e-100)  # all zeros: compared absolutely, and squared stays > 0


def distance(ref: Trace, got: Trace) -> torch.Tensor:
    """(R, G): the largest difference of two records' statistics relative to the reference record's scale, inf where
    they cannot be the same values (entry counts that are no multiple of each other, NaN or inf fractions apart)."""
    a, b = ref.prints[:, None, :], got.prints[None, :, :]
    s = scale(ref.prints)[:, None, None]
    diff = (a[..., STATS] - b[..., STATS]).abs() / s
    diff[..., SQUARE - 5] = (a[..., SQUARE] - b[..., SQUARE]).abs() / s[..., 0] ** 2
    worst = diff.amax(dim=-1)
    na, nb = a[..., 0], b[..., 0]
    whole = (torch.remainder(torch.maximum(na, nb), torch.minimum(na, nb).clamp_min(1)) == 0) & (torch.minimum(na, nb) > 0)
    special = (a[..., 1:4] - b[..., 1:4]).abs().amax(dim=-1) < 1e-12
    return torch.where(whole & special, worst, torch.full_like(worst, float("inf")))


def tolerance(ref: Trace, got: Trace) -> torch.Tensor:
    """(R, G): the relative tolerance of each pair, the reference record's dtype's (the call's: a learner's float32
    tensor in a float64 call matches only loosely, which is where rounding starts)."""
    rt = torch.tensor([RTOL.get(ref.dtype(i), 2e-5) for i in range(len(ref.ops))], dtype=torch.float64)
    return rt[:, None].expand(len(ref.ops), len(got.ops))


def canonical(ref: Trace) -> list[int]:
    """Each reference record's stage: itself, or the record it copies (a clone, a reshape's copy: the same values)."""
    out = list(range(len(ref.ops)))
    for i, parents in enumerate(ref.parents):
        for p in parents:
            if p >= 0 and torch.equal(ref.prints[i], ref.prints[p]):
                out[i] = out[p]
                break
    return out


@dataclass(frozen=True)
class Alignment:
    departure: int | None
    rounding: bool  # the departure matches at float32 level in a float64 call
    closest: int | None  # the learner record closest to the departure
    last_matched: int | None
    arranged: bool  # every input of the departure matches: an operation that depends on layout got them arranged otherwise
    skipped: tuple[int, int] | None = None  # (reference record, learner record): the learner applies the step after
    # the departure straight to that reference record's equal: the departure's step is left out
    inserted: tuple[int, int, int] | None = None  # (reference record, learner record, learner record): the learner
    # applies an operator of its own to that reference record's equal, then the departure's operator to the result:
    # a step the reference does not take


def align(ref: Trace, got: Trace, outputs: set[int] | None = None, given=None) -> Alignment | None:
    """Where `got` (the learner's trace) departs from `ref`. `outputs`: the reference records the call returns (None:
    the last one); a record no output is computed from (a guard's abs, a test's max) is no stage. None where the
    traces say nothing (one of them empty, or every stage met). `given`: (N, WIDTH) fingerprints of the call's
    inputs: a learner record equal to one (a repeat of K) counts as that input."""
    if not ref.ops or not got.ops:
        return None
    inputs = fed(ref)
    useful = _ancestors(ref, outputs if outputs else {len(ref.ops) - 1})
    stage = canonical(ref)
    dist = distance(ref, got)
    tol = tolerance(ref, got)
    strict = (dist <= tol).any(dim=1).tolist()
    loose = (dist <= torch.maximum(tol, torch.full_like(tol, LOOSE))).any(dim=1).tolist()
    keep = [i for i in range(len(ref.ops)) if stage[i] == i]
    parents = {i: {stage[p] for p in ref.parents[i] if p >= 0} - {i} for i in keep}
    children = {i: set() for i in keep}
    for i in keep:
        for p in parents[i]:
            children[p].add(i)
    for i, orig in enumerate(stage):  # a copy's parents count for the record it copies
        if orig != i:
            for p in {stage[q] for q in ref.parents[i] if q >= 0} - {orig}:
                children[p].add(orig)
    fine = {}
    for i in reversed(keep):
        fine[i] = strict[i] or i not in useful or any(fine.get(c, False) for c in children[i] if c > i)
    for i in keep:  # a fill is the implementation's choice (-inf, the dtype's min, -1e9): it stands for its parents;
        # an initialiser (zeros_like, ones_like: a guard's or an accumulator's start) is no stage of the computation
        if not fine[i] and ((transparent(ref, i) and all(fine[p] for p in parents[i])) or _op(ref.ops[i]) in INITIAL):
            fine[i] = True
    if all(fine[i] for i in keep):
        return None
    if ref.dtype(keep[-1]) in (64, 128):
        for i in keep:
            if not fine[i] and loose[i] and all(fine[p] or loose[p] for p in parents[i]):
                return _result(ref, got, dist, strict, loose, keep, i, True, given)
    frontier = [i for i in keep if not fine[i] and all(fine[p] for p in parents[i]) and not transparent(ref, i)]
    frontier.sort(key=lambda i: (i not in inputs, i))
    if not frontier:
        return None
    at = frontier[0]
    while at not in inputs:  # a constant (positions' frequencies): the one that enters the computation is the stage
        nxt = [c for c in sorted(children[at]) if not fine[c] and c not in inputs]
        if not nxt:
            break
        at = nxt[0]
    return _result(ref, got, dist, strict, loose, keep, at, False, given)


TRANSPARENT = {"masked_fill", "where", "index_put", "fill", "masked_scatter"}
INITIAL = {"zeros_like", "ones_like", "full_like", "empty_like", "zeros", "ones", "full", "empty", "new_zeros",
           "new_ones", "new_full", "new_empty", "scalar_tensor"}


def transparent(ref: Trace, i: int) -> bool:
    """Is the record a fill (masked scores): no stage of its own, since the fill value is free?"""
    return _op(ref.ops[i]) in TRANSPARENT


def _op(text: str) -> str:
    return text.split("(")[0].removeprefix("aten.").rstrip("_")


def _result(ref, got, dist, strict, loose, keep, at, rounding, given=None) -> Alignment:
    """The alignment's findings about departure `at`: the learner's records made from the same (matched) inputs
    tell a step left out (they go on with the reference's next operator) from a layout (the same operator on the
    same inputs, another result); else the closest record."""
    stage = canonical(ref)
    last = max((i for i in keep if strict[i] and i < at), default=None)
    sources = {stage[p] for p in ref.parents[at] if p >= 0}
    tol = tolerance(ref, got)
    equal = {j for p in sources if strict[p] for j in range(len(got.ops)) if dist[p, j] <= tol[p, j]}
    made = [k for k, ps in enumerate(got.parents) if equal & set(ps)]  # the learner's records from those inputs
    op = _op(ref.ops[at])
    skipped, inserted, arranged = None, None, False
    if rounding:
        pass
    elif not sources:  # computed from the call's inputs alone: the learner's same operator on inputs alone
        inputs = {-1} | _equal_to(got, given)
        alike = [k for k, ps in enumerate(got.parents) if set(ps) <= inputs and _op(got.ops[k]) == op]
        arranged = op in LAYOUT and bool(alike) and bool(got.prints[alike[0], 0] == ref.prints[at, 0])
    elif any(strict[p] for p in sources):
        same_op = [k for k in made if _op(got.ops[k]) == op]
        if op in LAYOUT and all(strict[p] for p in sources) and any(
                set(got.parents[k]) - {-1} <= equal and got.prints[k, 0] == ref.prints[at, 0] for k in same_op):
            arranged = True
        elif not same_op:
            after = {_op(ref.ops[i]) for i in keep if stage[at] in {stage[p] for p in ref.parents[i] if p >= 0}}
            went_on = [k for k in made if _op(got.ops[k]) in after]
            if went_on:
                p = next(p for p in sorted(sources) if any(dist[p, j] <= tol[p, j] for j in got.parents[went_on[0]] if j >= 0))
                skipped = (p, went_on[0])
            else:
                inserted = _inserted(ref, got, dist, tol, sources, strict, made, op)
    if rounding:
        closest = int(torch.argmin(dist[at]))  # the tensor that matches at float32 level
    else:
        closest = skipped[1] if skipped else inserted[2] if inserted else _closest(ref, got, at, made)
    return Alignment(at, rounding, closest, last, arranged, skipped, inserted)


def _inserted(ref, got, dist, tol, sources, strict, made, op) -> tuple[int, int, int] | None:
    """(p, m, k): the learner's record m applies an elementwise operator of its own to right values, among them its
    equal of the reference's matched source p, and k goes on from m (scores -> a division of its own -> the softmax).
    Only where every input of m is right (equals a matched reference record) and m itself equals none: an operator on
    right values that the reference never applies, not one fed a wrong tensor besides (a concatenation with a wrong
    part). Either k applies the departure's operator `op`, or m's values are p's times a constant or shifted by one and
    nothing the learner computes from m equals a reference record: m is where its computation first departs."""
    hit = (dist <= tol) & torch.tensor(strict, dtype=torch.bool)[:, None]
    right = set(torch.nonzero(hit.any(dim=0)).flatten().tolist())
    steps = []  # (m, p): the learner's own elementwise steps on right values
    for m in made:
        if _op(got.ops[m]) == op or _op(got.ops[m]) in TRANSPARENT | LAYOUT:  # a concatenation or product of right
            continue  # parts is an arrangement (the reference may join them otherwise); an elementwise step keeps p's
        if not all(j in right for j in got.parents[m] if j >= 0) or bool((dist[:, m] <= tol[:, m]).any()):
            continue
        p = next((p for p in sorted(sources) if strict[p]
                  and any(dist[p, j] <= tol[p, j] for j in got.parents[m] if j >= 0)), None)
        if p is not None and bool(got.prints[m, 0] == ref.prints[p, 0]):
            steps.append((m, p))
    for m, p in steps:
        k = next((k for k in range(m + 1, len(got.ops)) if m in got.parents[k] and _op(got.ops[k]) == op), None)
        if k is not None:
            return p, m, k
    for m, p in steps:
        consumers = [k for k in range(m + 1, len(got.ops)) if m in got.parents[k]]
        found = relation(ref.prints[p], got.prints[m])
        if consumers and found is not None and not _base_change(found) \
                and not any(j in right for j in _descendants(got, m)):
            return p, m, consumers[0]
    return None


def _base_change(found: tuple[str, float]) -> bool:
    """Scores times log2(e) (or ln 2): the exp2 form of a softmax, a step of the learner's own that is right in itself,
    never named as where a computation departs when something later is wrong."""
    how, c = found
    return how == "times" and any(abs(c - x) <= 1e-9 * x for x in (1 / math.log(2), math.log(2)))


def _descendants(got: Trace, m: int) -> set[int]:
    """The learner's records computed from record m, directly or not."""
    out = {m}
    for k in range(m + 1, len(got.ops)):
        if out & set(got.parents[k]):
            out.add(k)
    return out - {m}


def relation(a: torch.Tensor, b: torch.Tensor) -> tuple[str, float] | None:
    """("times", c) or ("shifted", c) where fingerprint b is fingerprint a times a constant c > 0 or shifted by c (its
    extremes, means and order statistics alike), else None."""
    s = float(scale(a[None])[0])
    qa, qb = torch.cat([a[5:9], a[10:]]), torch.cat([b[5:9], b[10:]])  # min, max, mean, mean |x|, order statistics
    if float(a[8]) > 1e-12 * s:
        c = float(b[8] / a[8])
        if c > 0 and (qb - c * qa).abs().max() <= 1e-6 * s * max(c, 1):
            return "times", c
    shift = float(b[7] - a[7])
    if (qb[[0, 1, 2]] - qa[[0, 1, 2]] - shift).abs().max() <= 1e-6 * s and (qb[4:] - qa[4:] - shift).abs().max() <= 1e-6 * s:
        return "shifted", shift
    return None


def _equal_to(got: Trace, given) -> set[int]:
    """The learner's records with the values of one of the call's inputs (a copy, a repeat, a transpose of it)."""
    if given is None or not len(given):
        return set()
    probe = Trace.probe(given, "input")
    hit = distance(probe, got) <= RTOL[64]
    return {int(j) for j in torch.nonzero(hit.any(dim=0)).flatten()}


def _closest(ref: Trace, got: Trace, at: int, made=()) -> int | None:
    """The learner record most like reference record `at`: as many entries first, then one made from the same inputs,
    then the same operator, then the nearest finite statistics (NaN where none were expected still counts as close:
    it is what the learner computed)."""
    op = _op(ref.ops[at])
    a, s = ref.prints[at, STATS], float(scale(ref.prints[at:at + 1])[0])
    best, key = None, None
    for j in range(len(got.ops)):
        if got.prints[j, 0] % max(ref.prints[at, 0], 1) and ref.prints[at, 0] % max(got.prints[j, 0], 1):
            continue
        d = torch.nan_to_num((got.prints[j, STATS] - a).abs() / s, nan=float("inf"), posinf=float("inf")).amax()
        k = (bool(got.prints[j, 0] != ref.prints[at, 0]), _op(got.ops[j]) != op, j not in made, float(d))
        if key is None or k < key:
            best, key = j, k
    return best


LAYOUT = {"mm", "bmm", "addmm", "baddbmm", "matmul", "_softmax", "_log_softmax", "sum", "amax", "amin", "mean",
          "logsumexp", "cat", "stack", "cumsum"}
"""Operators whose result depends on how their inputs are laid out (which axis is which), not only on their values."""


def _ancestors(ref: Trace, ends: set[int]) -> set[int]:
    """`ends` and every record they are computed from (through copies too)."""
    out, todo = set(), list(ends)
    while todo:
        i = todo.pop()
        if i not in out:
            out.add(i)
            todo += [p for p in ref.parents[i] if p >= 0]
    stage = canonical(ref)
    return out | {stage[i] for i in out} | {i for i in range(len(ref.ops)) if stage[i] in out}


def fed(ref: Trace) -> set[int]:
    """The reference records that depend on the call's inputs or parameters (the others are constants: positions'
    frequencies, an arange)."""
    out: set[int] = set()
    for i, parents in enumerate(ref.parents):
        if any(p == -1 or p in out for p in parents):
            out.add(i)
    return out
