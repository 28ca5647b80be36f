"""Check gradients: of every input and parameter, against autograd through the reference."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..compare import argmax_index, mismatch, tolerance
from ..context import compare_all, grad_name, returns_arrays, valid_mask
from ..registry import Check, options, register
from ...draw.groups import carried_cases, case_key, each_case, form, with_args
from ...draw.scenarios import Case, base_call, draw_configs, generator, make_mask
from ...masks import rule
from ...run.harness import flat_positions


@dataclass(frozen=True)
class GradOptions:
    """The gradients check's options: `long`, dims that one more call per variant takes over config 0's, where the
    gradient's path may change with the length (a decoder that detaches its state every 16 steps, truncated
    backpropagation through time, is right on every shorter call); `long_args`, arguments that call takes instead
    of the drawn ones (a chunk size, so that the state crosses many chunks)."""

    long: dict | None = None
    long_args: dict | None = None


GRAD_FORMS = {0: ("batch", "query", "none"), 1: ("batch",), 3: ("batch", "query")}
"""The configs whose gradients are asked, each with its masking forms: the general one also with the masking argument
left out (a path of its own, where in-place operations break the backward), the decoding step (one query after
several keys: a path taken under no_grad there loses every gradient), and the long one."""


def group_grad(problem, seed):
    """Gradients on configs 0, 1 and 3 (GRAD_FORMS), with every query seeing at least one key; then, where the masking
    argument can leave a row with no allowed key, config 0 with such a row (its gradients must be finite: the row
    contributes 0)."""
    cases = [
        Case(case_key("grad", vi, ci, kind), "grad", variant, cfg,
             base_call(problem, cfg, variant, gen("grad"), make_mask(problem, kind, cfg, gen("glens", kind), low=1),
                       grad=True), lens=kind)
        for vi, variant, ci, cfg, gen in each_case(problem, seed) if ci in GRAD_FORMS
        for kind in dict.fromkeys(form(problem, k) for k in GRAD_FORMS[ci])
    ]
    cases += carried_cases(problem, seed, "grad", grad=True)
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        kind = form(problem, "query")
        if ci != 0 or kind == "none":
            continue
        call = base_call(problem, cfg, variant, gen("grad", "empty"), make_mask(problem, kind, cfg, gen("gempty", kind)),
                         grad=True)
        case = Case(case_key("grad", vi, ci, kind, "empty"), "grad", variant, cfg, call, lens=kind, tags=frozenset({"empty"}))
        if not valid_mask(problem, case).any(-1).all():  # a row with no allowed key was drawn
            cases.append(case)
    return cases + _partial_cases(problem, seed) + _long_cases(problem, seed) + _wide_cases(problem, seed)


def _wide_cases(problem, seed):
    """Config 0 of each variant with Tq < Tk (its two lengths swapped where Tq > Tk), in the mask rule's long form,
    where the forms above never draw it (a causal flag is set there only where Tq > Tk): bottom-right rows whose
    allowed keys span several blocks, where a backward of one's own that follows another diagonal goes wrong."""
    kind = form(problem, rule(problem).long)
    if problem.mask_role is None or kind in {form(problem, k) for k in GRAD_FORMS[0]}:
        return []
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0 or cfg.get("Tq") is None or cfg.get("Tk") is None:
            continue
        lo, hi = sorted((cfg["Tq"], cfg["Tk"]))
        wide = problem.fit({**cfg, "Tq": lo, "Tk": hi}, variant)
        call = base_call(problem, wide, variant, gen("grad", "wide"), make_mask(problem, kind, wide, gen("gwide")),
                         grad=True)
        cases.append(Case(case_key("grad", vi, ci, "wide"), "grad", variant, wide, call, lens=kind))
    return cases


def _long_cases(problem, seed):
    """Config 0 of each variant with the spec's long dims (GradOptions.long), a key padding draw."""
    dims = options(problem, "gradients").long
    if not dims:
        return []
    cases = []
    for vi, variant in enumerate(problem.variants):
        cfg = problem.fit({**draw_configs(seed)[0], **dims}, variant)
        gen = generator(seed, problem.id, vi, "grad", "long")
        kind = form(problem, "batch")
        call = base_call(problem, cfg, variant, gen, make_mask(problem, kind, cfg, gen, low=1), grad=True)
        if options(problem, "gradients").long_args:
            call = with_args(problem, call, options(problem, "gradients").long_args)
        cases.append(Case(case_key("grad", vi, 0, "long"), "grad", variant, cfg, call, lens=kind, tags=frozenset({"long"})))
    return cases


def _partial_cases(problem, seed):
    """Config 0 of each variant with the first input that takes a gradient (the queries) not asking for one, as a
    caller's frozen input does: the others' gradients must not change (code that detaches when it sees an input
    without requires_grad is seen here)."""
    first = next((i for i, a in enumerate(problem.args) if a.role in ("query", "tensor")), None)
    cases = []
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        if ci != 0 or first is None or returns_arrays(problem):
            continue
        call = base_call(problem, cfg, variant, gen("grad", "partial"),
                         make_mask(problem, form(problem, "batch"), cfg, gen("gpartial"), low=1), grad=True)
        call["frozen"] = sorted(set(call.get("frozen", ())) | {first})
        cases.append(Case(case_key("grad", vi, ci, "partial"), "grad", variant, cfg, call, lens=form(problem, "batch"),
                          tags=frozenset({"partial"})))
    return cases


def check_gradients(ctx):
    tol = tolerance("float64", grad=True)
    for case in ctx.of("grad"):
        res = ctx.result(case)
        compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance("float64"))
        for key, expected in ctx.ref[case.key].grads.items():
            got = res.grads.get(key)
            label = f"gradient of {grad_name(ctx.problem, key)}"
            if expected is None:  # an input the contract says is not read here (a memory beside its cache)
                if got is not None and bool((got != 0).any()):
                    ctx.fail(case, f"{label}: a gradient reaches it, where the contract does not read it in this call "
                             "(no gradient may flow there)")
                continue
            if got is None and not bool((expected != 0).any()):
                continue  # its gradient is 0 here (the outputs read nothing of it): none reaching it is the same
            if got is None:
                detached = all(g is None for g in res.grads.values())
                ctx.fail(case, f"{label}: no gradient reaches it " + (
                    "(nor any input or parameter: the outputs are not connected to the autograd graph, detached or "
                    "computed without grad)" if detached else "(detached, or the parameter is never used)"))
                continue
            if "empty" in case.tags and not torch.isfinite(got).all() and torch.isfinite(expected).all():
                ctx.fail(case, f"{label} has NaN or inf where a row has no allowed key: such a row contributes 0 to every "
                         "gradient. A -inf fill makes its softmax 0/0, whose backward is NaN even when the forward is "
                         "cleaned (nan_to_num, where): in training that NaN reaches every parameter upstream. Fill "
                         "masked scores with a finite very negative number (torch.finfo(dtype).min) and multiply the "
                         "weights by the mask", symptom="nan_grad_empty_row")
            problem = mismatch(label, got, expected, tol)
            if problem:
                masked = (key.startswith("input:") and key[6:].isdigit() and int(key[6:]) in ctx.problem.arg_index("key", "value")
                          and expected.abs().max() > 0 and _at_masked_key(ctx, case, got, expected))
                ctx.fail(case, problem + ("\nThat position is a masked key: no gradient may flow there." if masked else "")
                         + _from_unused(case, got, expected))


def _from_unused(case, got, expected) -> str:
    """Where a gradient is NaN or inf that should be finite, and the call sent NaN or inf (storage the contract says
    must not matter, such as paged attention's unused slots): what carries it into the gradient."""
    if torch.isfinite(got).all() or not torch.isfinite(expected).all():
        return ""
    sent = [t for _, t in flat_positions(case.call.get("args", []))]
    if not any(isinstance(t, torch.Tensor) and t.is_floating_point() and not torch.isfinite(t).all() for t in sent):
        return ""
    return ("\nThis call's inputs hold NaN or inf where the contract says they must not matter (unused storage): a "
            "product masked only after it is taken still carries 0 * NaN = NaN into the backward. Select the values "
            "you use (torch.where, or indexing) before multiplying.")


def _at_masked_key(ctx, case, got, expected) -> bool:
    """Is the worst gradient error, on a key or value input, on a row that no query may attend?"""
    mask = valid_mask(ctx.problem, case)
    if mask.all() or got.dim() < 2 or got.shape[-2] != mask.shape[-1]:
        return False
    err = (got.to(torch.float64) - expected.to(torch.float64)).abs()
    at = argmax_index(err)
    attended = mask.reshape(-1, mask.shape[-1]).any(0)  # keys some query may attend, in some batch row
    return not bool(attended[at[-2]])


register(Check("gradients", "gradients of inputs and parameters", {"grad": group_grad}, check_gradients,
               names=("nan_grad_empty_row",), options=GradOptions,
               needs=lambda p: None if not returns_arrays(p) else "a torch problem"))
