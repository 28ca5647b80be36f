"""Calls made as a model's code makes them: with non-contiguous tensors (a transposed view), with every argument
with its optional arguments passed by keyword as the contract names them (mask=, is_causal=, block_q=: the tensors
go by position, as callers pass them), and with one tensor passed for two arguments of the same shape (values is
keys, as in self-attention), and as inference code calls a model: under torch.no_grad(), on a module that has
answered another call first, its weights since replaced (an optimizer's step, a checkpoint loaded) and its input
buffers refilled in place. Code that calls .view on its inputs, renames a parameter, tells arguments apart by
identity, or keeps a projection, a table or a result from an earlier call (keyed by a tensor's identity or address,
or taken only where no gradient is recorded) is right on every other draw and wrong here. And a module called in
train() mode with no dropout asked of it (none in its contract, or p = 0): code that adds dropout of its own (nanoGPT's
0.1) or takes another path in training is wrong there only."""
from __future__ import annotations

import torch

from .groups import carried_cases, case_key, each_case, form
from .scenarios import Case, base_call, make_mask

WORDS = {"strided": "non-contiguous inputs (transposed views)", "kw": "the optional arguments passed by keyword",
         "alias": "one tensor passed for two or three arguments of the same shape (values is keys; self-attention's "
                  "x, x, x)",
         "inference": "torch.no_grad(), after another call on the same module or function (new weights loaded since, "
                      "the same input tensors refilled)",
         "after": "a short call on the same module or function first (new weights loaded since)",
         "leaves": "inputs that require grad (as a training step's)"}
"""How a message names each convention (describe.call_text adds it to the call)."""

USES = {"strided": lambda call: call.get("layout") == "strided", "kw": lambda call: bool(call.get("kw")),
        "alias": lambda call: bool(call.get("alias")),
        "inference": lambda call: bool(call.get("warm")) and bool(call.get("no_grad")),
        "after": lambda call: bool(call.get("warm")) and not call.get("no_grad"),
        "leaves": lambda call: bool(call.get("leaves"))}
"""Whether a call uses each convention (the flags the harness reads)."""


def _aliases(problem, args) -> list[list[int]]:
    """[[i, j], ...]: each later query, key or value argument of the same shape and dtype as an earlier one, paired
    with the first (arguments derived from others, as a backward's o and dO, are left apart)."""
    free = set(problem.arg_index("query", "key", "value"))
    pairs = []
    for j, b in enumerate(args):
        i = next((i for i, a in enumerate(args[:j]) if {i, j} <= free
                  and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                  and a.is_floating_point() and a.shape == b.shape and a.dtype == b.dtype), None)
        if i is not None:
            pairs.append([i, j])
    return pairs


def _aliased(call: dict, pairs) -> dict:
    """The call with argument j given argument i's very tensor, for each pair [i, j]."""
    args = list(call["args"])
    for i, j in pairs:
        args[j] = args[i]
    return dict(call, args=args, alias=pairs)


def convention_cases(problem, seed: int, group: str, allowed=tuple(WORDS)) -> list[Case]:
    """Config 0 of each variant, per-query masking, float64: strided, by keyword, aliased where two tensor
    arguments share a shape (the call's own argument is the earlier one's tensor: the reference and the grader's
    comparisons see the same values), and where the queries can be the keys (and values), a call with Tq = Tk that
    passes one tensor for them (nn.MultiheadAttention takes a path of its own when query is key is value; a
    cross-attention called as model(x, x)), in inference after an earlier call (a call of its own draw, with weights of
    its own), and a module in train() mode where no dropout is asked; only the conventions in `allowed`."""
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0:
            continue
        kind = form(problem, "query")
        call = base_call(problem, cfg, variant, gen("convention"), make_mask(problem, kind, cfg, gen("convention", "lens")))
        made = {"strided": dict(call, layout="strided"),
                "kw": dict(call, kw=[n for n in problem.arg_names[:len(call["args"])] if n in problem.call_defaults])}
        earlier = base_call(problem, cfg, variant, gen("convention", "earlier"),
                            make_mask(problem, kind, cfg, gen("convention", "earlier", "lens")))
        # one earlier run in the call's own dtype: a module cast to float32 and back rounds its buffers (Hugging Face's
        # inv_freq), which no caller of a correct module could tell from a table kept in the wrong dtype
        made["inference"] = dict(call, no_grad=True, warm={"args": earlier["args"], "state": earlier["state"]})
        if problem.is_module:  # the drawn calls ask no dropout (the constructor's default): train() changes nothing
            made["train"] = dict(call, train=True)
        pairs = _aliases(problem, call["args"])
        if pairs:
            made["alias"] = _aliased(call, pairs)
        query, square = problem.arg_index("query")[:1], cfg
        if query and len(problem.arg_index("query", "key", "value")) >= 2 and not any(query[0] in p for p in pairs):
            square = problem.fit({**cfg, "Tk": cfg["Tq"]}, variant)  # Tq = Tk: self-attention's x, x(, x)
            selfish = base_call(problem, square, variant, gen("convention", "self"),
                                make_mask(problem, kind, square, gen("convention", "self", "lens")))
            tied = _aliases(problem, selfish["args"])
            if any(query[0] in p for p in tied):
                made["self"] = _aliased(selfish, tied)
        for name, c in made.items():
            kind_of = "alias" if name == "self" else name
            if kind_of in allowed:
                cases.append(Case(case_key(group, vi, ci, name), group, variant, square if name == "self" else cfg, c,
                                  lens=kind, tags=frozenset({"convention", kind_of})))
    return cases


def inference_carried(problem, seed: int, group: str) -> list[Case]:
    """Inference given a cache or state, where the spec's own draws never carry one (groups.carried_cases), after an
    earlier call of the same module: a decoder's step under no_grad must not write the new state into the given one.
    For the side effects only (a given cache need not be what the memory projects: no oracle holds)."""
    given, earlier = carried_cases(problem, seed, group), carried_cases(problem, seed, group + "_earlier")
    return [Case(f"{c.key}/inference", group, c.variant, c.cfg,
                 dict(c.call, no_grad=True, warm={"args": e.call["args"], "state": e.call["state"]}),
                 lens=c.lens, tags=frozenset({"convention", "inference"}))
            for c, e in zip(given, earlier)]


def words(call: dict) -> str:
    """", made with ...": the conventions a call uses, for messages ("" for none)."""
    used = [WORDS[k] for k, uses in USES.items() if uses(call) and k != "after"]
    after = f", after {WORDS['after'].replace(' first', '')}" if USES["after"](call) else ""
    return (f", made with {' and '.join(used)}" if used else "") + after
