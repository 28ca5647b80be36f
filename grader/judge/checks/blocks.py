"""Check block_invariance: a tiled computation gives the same results whatever its block sizes.

The same inputs are called with the contract's default blocks and with every block setting of the spec's
`blocks` hook (sizes that leave a partial last block on each axis), with each masking kind; each result must
equal the default call's within float64 rounding. Reads the learner's outputs only."""
from __future__ import annotations

from ..compare import mismatch, tolerance
from ..registry import Check, register
from .outputs import block_settings
from ...draw.groups import case_key, each_case, with_args
from ...draw.scenarios import Case, base_call, make_mask, mask_kinds


def group_block_pairs(problem, seed):
    """Config 0 of each variant and each masking kind: one input set, default blocks and then each setting."""
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        for kind in mask_kinds(problem, cfg):
            call = base_call(problem, cfg, variant, gen("blocks", kind), make_mask(problem, kind, cfg, gen("blocks", kind)))
            defaults = {n: problem.call_defaults[n] for o in block_settings(problem, cfg) for n in o}
            settings = [defaults, *block_settings(problem, cfg)]
            for bi, overrides in enumerate(settings):
                cases.append(Case(case_key("block_pairs", vi, ci, kind, bi), "block_pairs", variant, cfg,
                                  with_args(problem, call, overrides), lens=kind, reference=False,
                                  meta={"blocks": overrides, "first": bi == 0}))
    return cases


def check_block_invariance(ctx):
    tol = tolerance("float64")
    first = None
    for case in ctx.of("block_pairs"):
        got = ctx.outputs(case)
        if case.meta["first"]:
            first = (case, got)
            continue
        for name, g, e in zip(ctx.problem.outputs, got, first[1]):
            bad = mismatch(name, g, e, tol)
            if bad:
                ctx.fail(case, f"the same inputs with {_text(first[0].meta['blocks'])} gave other results: the block "
                         f"sizes may change rounding only (the last block of each axis may be partial)\n{bad}")


def _text(blocks: dict) -> str:
    return ", ".join(f"{n}={v}" for n, v in blocks.items())



register(Check("block_invariance", "same results for any block sizes (partial blocks too)",
               {"block_pairs": group_block_pairs}, check_block_invariance,
               needs=lambda p: None if "blocks" in (p.options or {}).get("parity_float64", {})
               else "block settings (spec options['parity_float64']['blocks'])", concepts=(("memory", None),)))
