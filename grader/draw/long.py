"""Long calls: 67 queries after 1031 keys (and 67 steps of a decoder after a cache of 1031), where the configs' other
draws stop at 11. Code that takes another path past some length (a table of 128 or 1024 positions, as model code sizes
its RoPE and ALiBi tables, a float32 softmax past 64 keys, queries taken 64 at a time with each block's offset lost, a
mask dropped after step 8) is right on every short draw and wrong here; float32 rounding inside a float64 computation
grows with the length too."""
from __future__ import annotations

import torch

from .groups import case_key, each_case, form, with_args
from .scenarios import Case, base_call, draw_configs, generator, make_mask
from ..masks import rule

LONG = {"B": 2, "H": 2, "Tq": 67, "Tk": 1031}
"""Prime lengths past 1024 keys and 64 queries; two batch rows and two heads."""


FAR = {"B": 1, "H": 2, "Tq": 2, "Tk": 8209}
"""A decoding call at far positions: 2 queries after 8209 keys, past the 2048, 4096 and 8192 positions that model code
sizes its tables by (max_position_embeddings: RoPE's cos and sin, ALiBi's bias). Made after a short call (SHORT) on the
same module or function: a table sized by the first call it sees, and never grown, is wrong here."""

FARTHEST = {"B": 1, "H": 2, "Tq": 2, "Tk": 32771}
"""The parity check's far call, where a problem's code keeps a table of positions (RoPE's cos and sin, ALiBi's
distances, a mask's positions): 2 queries after 32771 keys, past the 32768 positions that model code sizes such tables
by (Mistral's and Qwen2's max_position_embeddings); after a short call, as FAR."""

SHORT = {"Tq": 2, "Tk": 5}
"""The lengths of the call a FAR call follows."""


TALL = {"B": 1, "H": 2, "Tq": 257, "Tk": 263}
"""Prime lengths past the query blocks of 64, 128 and 256 that tiled code takes (each block's offset into the mask or
the causal rule kept, or lost): one batch row, so that the call stays small."""


def long_cases(problem, seed: int, group: str, block_args=(), sizes=None, name: str = "long",
               after_short: bool = False) -> list[Case]:
    """Float64 calls, one per variant, of LONG's sizes with the mask rule's long form (per-query masking, some query
    with no allowed key; a causal flag set), every
    integer tensor (lengths, positions, tables) as int32 (the contract asks an integer tensor, not int64: lengths past
    127 and 255 are drawn here); the arguments in `block_args` (the block settings other calls vary) at their
    defaults, which long inputs are run with. `sizes`: other sizes than LONG (a spec's, where its calls cost more, or
    FAR); `name`, the last part of their keys. `after_short`: each call made after one of SHORT's lengths on the same
    module or function (its own draw and weights), as a model decodes far after a short prompt."""
    raw = {**draw_configs(seed)[0], **(sizes or LONG)}
    cases = []
    for vi, variant, ci, _, _ in each_case(problem, seed):
        if ci != 0:
            continue
        cfg = problem.fit(raw, variant)
        gen = lambda *p: generator(seed, problem.id, vi, name, *p)  # noqa: E731
        kind = form(problem, rule(problem).long)
        call = base_call(problem, cfg, variant, gen(), make_mask(problem, kind, cfg, gen("lens")))
        call["args"] = [_int32(a) for a in call["args"]]
        if after_short:
            short = problem.fit({**raw, **SHORT}, variant)
            earlier = base_call(problem, short, variant, gen("short"), make_mask(problem, kind, short, gen("short", "lens")))
            call["warm"] = {"args": [_int32(a) for a in earlier["args"]], "state": earlier["state"]}
        defaults = {n: problem.call_defaults[n] for n in block_args if n in problem.call_defaults}
        if defaults:
            call = with_args(problem, call, defaults)
        tags = {"long", name} | ({"block"} if defaults else set()) | ({"after"} if after_short else set())  # block
        # settings at their defaults: a block call too; after a short call: the convention draw/conventions.py names
        cases.append(Case(case_key(group, vi, ci, name), group, variant, cfg, call, lens=kind, tags=frozenset(tags)))
    return cases


def _int32(a):
    """An integer tensor as int32 (booleans and floats as they are)."""
    if isinstance(a, torch.Tensor) and not a.is_floating_point() and not a.is_complex() and a.dtype != torch.bool:
        return a.to(torch.int32)
    return a
