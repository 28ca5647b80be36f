"""Calls where two sizes that a masking form could be confused by are equal: a mask (H, Tq, Tk) has the shape of a
per-batch (B, Tq, Tk) when B == H, a 1-D mask (Tk,) that of a per-query one when Tq == Tk, (B, Tq) lengths that of
(Tq, B) when B == Tq. Code that guesses the form from a size is right on every other draw and wrong here."""
from __future__ import annotations

from .groups import case_key, each_case
from .scenarios import Case, base_call, draw_configs, generator, make_mask
from ..masks import rule
from ..masks.layout import score_names


def tied_config(problem, seed: int, variant: dict, pair: tuple[int, int]) -> dict | None:
    """Config 0 fitted to `variant` with the score dims at positions `pair` equal (and above 1): None where the
    scores lack such dims, or where the spec's fit gives no such config."""
    raw = draw_configs(seed)[0]
    cfg = problem.fit(raw, variant)
    names = score_names(problem, cfg)
    if len(names) < 3 or max(pair) >= len(names) or min(pair) < -len(names):
        return None
    a, b = names[pair[0]], names[pair[1]]
    if a == b:
        return None
    for x, y in ((a, b), (b, a)):
        if cfg[a] != cfg[b] and x in raw:
            tied = problem.fit({**raw, x: cfg[y]}, variant)
            cfg = tied if tied[a] == tied[b] else cfg
    return cfg if cfg[a] == cfg[b] > 1 else None


def tied_cases(problem, seed: int, group: str) -> list[Case]:
    """Float64 calls, one per variant and form the problem's mask rule names as ambiguous (MaskRule.ambiguous), with
    the two sizes tied; their masking form is "<form>_tied" (its own words in messages)."""
    r = rule(problem)
    cases = []
    for vi, variant, ci, _, _ in each_case(problem, seed):
        for kind, pair in (r.ambiguous.items() if ci == 0 else ()):
            cfg = tied_config(problem, seed, variant, pair)
            if cfg is None or kind not in r.forms(problem, cfg):
                continue
            gen = lambda *p: generator(seed, problem.id, vi, "tied", kind, *p)  # noqa: E731
            call = base_call(problem, cfg, variant, gen(), make_mask(problem, kind, cfg, gen("lens")))
            cases.append(Case(case_key(group, vi, ci, f"{kind}_tied"), group, variant, cfg, call, lens=f"{kind}_tied",
                              tags=frozenset({"tied"})))
    return cases
