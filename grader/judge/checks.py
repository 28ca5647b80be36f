"""Generic checks, parameterised by a problem's spec. Each reads some case groups and
either returns (passed) or raises Failed with a message that says what was called, what
came back, what was expected, and by how much and where it differs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..errors import SpecError
from .compare import STABILITY, argmax_index, mismatch, tolerance
from .context import Failed, compare_all, valid_mask
from ..draw.describe import call_text, ctor_text, error_text
from ..run.dropout import dropped_weights
from ..draw.scenarios import dim_names, output_shapes, spread


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    groups: tuple[str, ...]
    judge: Callable
    needs_cuda: bool = False


# ---- the checks -------------------------------------------------------------------------


def check_no_torch(ctx):
    for case in ctx.of("imports"):
        modules = ctx.result(case)["modules"]
        if modules:
            raise Failed(f"importing {ctx.problem.id}.py in a fresh Python imports {', '.join(modules[:3])}: this "
                         "problem is NumPy only; remove every torch import (also those of modules it imports)",
                         symptom="imports_torch")


def check_oracle(ctx):
    """Parity with a library implementation (ctx.ref[...]["oracle"]) on every row with an allowed key."""
    tol = tolerance("float64")
    for case in ctx.of("base"):
        got, oracle = ctx.outputs(case), ctx.ref[case.key]["oracle"]
        rows = valid_mask(ctx.problem, case).any(-1)  # weights' rows with an allowed key
        for i, (name, g, e) in enumerate(zip(ctx.problem.outputs, got, oracle)):
            keep = rows
            while keep.dim() > e.dim() - 1:  # an output row mixes every head: keep it where all heads attend
                keep = keep.all(1)
            if tuple(g.shape) != tuple(e.shape):
                ctx.fail(case, f"{name}: shape {tuple(g.shape)}, expected {tuple(e.shape)}")
            keep = keep.expand(e.shape[:-1])
            problem = mismatch(f"{name} (on rows with an allowed key)", g[keep], e[keep], tol)
            if problem:
                ctx.fail(case, f"compared with {ctx.problem.oracle.__doc__.strip()}:\n{problem}")


def check_memory(ctx):
    for case in ctx.of("memory"):
        res = ctx.result(case)
        peak, allowed = res["peak"], case.meta["allowed"]
        if not peak["ops"]:
            ctx.fail(case, "the allocation measurement saw no operator during the forward: it was switched off "
                     "(a disabled dispatch mode); the memory bound cannot be checked, so it is not met")
        limit, resident = case.meta.get("resident_kb"), peak.get("resident_kb")
        if limit is not None and resident is not None and resident > limit:
            ctx.fail(case, f"the process's resident memory grew by {resident / 1024:.1f} MB during the forward; "
                     f"a chunked solution needs well under {limit / 1024:.0f} MB here: the full (B, Tq, Tk, h) "
                     "tensor, or a large part of it, was built")
        if peak["elements"] > allowed:
            ctx.fail(case, f"the forward allocated a tensor of {peak['elements']} elements ({peak['op']}); "
                     f"allowed at most {allowed} = max(max_elements, S). Build the (B, Tq, Tk, h) features a chunk "
                     "at a time, with chunks of at most max_elements elements")
        compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance(case.call["dtype"]))


def check_parameters(ctx):
    p = ctx.problem
    for case in ctx.of("ctor"):
        expected = {n: list(s) for n, s in p.params({**case.cfg, **case.variant}).items()}
        got = ctx.result(case)["params"]
        if got != expected:
            missing = sorted(set(expected) - set(got))
            extra = sorted(set(got) - set(expected))
            wrong = sorted(n for n in set(got) & set(expected) if got[n] != expected[n])
            lines = [f"{ctor_text(p, case.call['ctor'])} has parameters {_fmt(got)}", f"expected exactly {_fmt(expected)}"]
            lines += [f"missing: {', '.join(missing)}"] * bool(missing) + [f"unexpected: {', '.join(extra)}"] * bool(extra)
            lines += [f"{n}: shape {tuple(got[n])}, expected {tuple(expected[n])}" for n in wrong]
            raise Failed("\n".join(lines))
    check_value_errors(ctx)


def check_value_errors(ctx):
    """Every call or constructor of the ctor_error cases must raise ValueError (naming `words`)."""
    p = ctx.problem
    for case in ctx.of("ctor_error"):
        res = ctx.got.get(case.key)
        text = ctor_text(p, case.call["ctor"]) if case.call.get("ctor") else call_text(p, case)
        if res is None:
            raise Failed(f"called {text}\nno result: {ctx.failure}")
        if res["ok"]:
            raise Failed(f"{text} was accepted; {case.meta['why']} must raise ValueError")
        if not res["error"]["value_error"]:
            raise Failed(f"{text} raised {error_text(res)}; {case.meta['why']} must raise ValueError")
        missing = [w for w in case.meta["words"] if w not in res["error"]["text"]]
        if missing:
            raise Failed(f"{text} raised {error_text(res)}\nthe message must name the valid choices; missing: {', '.join(missing)}")


def _fmt(params: dict) -> str:
    return "{" + ", ".join(f"{n}: {tuple(s)}" for n, s in sorted(params.items())) + "}" if params else "none"


def check_shapes(ctx):
    for case in ctx.of("base"):
        got = ctx.raw_outputs(case)
        for name, g, shape in zip(ctx.problem.outputs, got, output_shapes(ctx.problem, case.cfg)):
            if tuple(g.shape) != shape:
                dims = dim_names(ctx.problem.dims[ctx.problem.outputs.index(name)], case.cfg)
                ctx.fail(case, f"{name} has shape {tuple(g.shape)}, expected {shape} = ({', '.join(dims)})")


def check_weight_sums(ctx):
    tol = tolerance("float64")
    for case in ctx.of("base"):
        w = ctx.outputs(case)[-1].to(torch.float64)
        shape = output_shapes(ctx.problem, case.cfg)[-1]
        if tuple(w.shape) != shape:
            ctx.fail(case, f"weights have shape {tuple(w.shape)}, expected {shape}")
        mask = valid_mask(ctx.problem, case).expand(shape)
        if not torch.isfinite(w).all():  # NaN compares false: it must fail here, never slip through a sum
            at = tuple((~torch.isfinite(w)).nonzero()[0].tolist())
            where = "a row with no allowed key must be all zeros" if not mask[at[:-1]].any() else "weights must be finite"
            ctx.fail(case, f"weights{list(at)} = {w[at].item()}: {where}")
        leaked = (w != 0) & ~mask
        if leaked.any():
            at = tuple(leaked.nonzero()[0].tolist())
            what = ("a row with no allowed key must be all zeros (not NaN, not uniform)" if not mask[at[:-1]].any()
                    else "masked keys must get weight exactly 0")
            ctx.fail(case, f"weights{list(at)} = {w[at].item():.6g}: {what}")
        sums = w.sum(-1)
        off = (sums - 1).abs() * mask.any(-1)
        if (off > 10 * tol.atol).any():
            at = argmax_index(off)
            ctx.fail(case, f"weights{list(at)} sum to {sums[at].item():.6g}; a row with a valid key must sum to 1")


def check_parity(group: str, dtype: str):
    def judge(ctx):
        for case in ctx.of(group):
            compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance(dtype))

    return judge


def check_gradients(ctx):
    tol = tolerance("float64", grad=True)
    names = ctx.problem.arg_names
    for case in ctx.of("grad"):
        res = ctx.result(case)
        compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance("float64"))
        for key, expected in ctx.ref[case.key]["grads"].items():
            got = res["grads"].get(key)
            label = f"gradient of {names[int(key[6:])]}" if key.startswith("input:") else f"gradient of {key[6:]}"
            if got is None:
                ctx.fail(case, f"{label}: no gradient reaches it (detached, or the parameter is never used)")
            problem = mismatch(label, got, expected, tol)
            if problem:
                masked = key.startswith("input:") and expected.abs().max() > 0 and _at_masked_key(ctx, case, got, expected)
                ctx.fail(case, problem + ("\nThat position is a masked key: no gradient may flow there." if masked else ""))


def _at_masked_key(ctx, case, got, expected) -> bool:
    """Is the worst gradient error on a key/value row that no query may attend?"""
    mask = valid_mask(ctx.problem, case)
    if mask.all() or got.dim() < 2 or got.shape[-2] != mask.shape[-1] or ctx.problem.outputs[0] == "weights":
        return False
    err = (got.to(torch.float64) - expected.to(torch.float64)).abs()
    at = argmax_index(err)
    attended = mask.reshape(-1, mask.shape[-1]).any(0)  # keys some query may attend, in some batch row
    return not bool(attended[at[-2]])


def check_masking(ctx):
    tol = tolerance("float64")
    groups = {}
    for c in ctx.of("mask"):
        groups.setdefault(c.key.rsplit("/", 1)[0], {})[c.key.rsplit("/", 1)[1]] = c
    for parts in groups.values():
        orig = ctx.outputs(parts["orig"])
        rules = [
            ("loud", orig, "changing keys/values (or scores) at masked positions changed the result: masked positions leak in"),
            ("per_query", orig, f"{_per_query_words(ctx.problem)} gave different results"),
        ]
        perm = parts["permuted"].meta["perm"]
        w = orig[-1]
        permuted_w = torch.gather(w, -1, spread(perm, w.dim() - 1).expand_as(w))
        rules.append(("permuted", orig[:-1] + [permuted_w],
                      "permuting valid key/value pairs together must permute the weights the same way and leave the output unchanged"))
        for name, expected, why in rules:
            got = ctx.outputs(parts[name])
            for out_name, g, e in zip(ctx.problem.outputs, got, expected):
                problem = mismatch(out_name, g, e, tol)
                if problem:
                    ctx.fail(parts[name], f"{why}\n{problem}")


def _per_query_words(problem) -> str:
    if problem.masking == "mask":
        return "a mask that broadcasts over queries and the same mask expanded to every query"
    return "valid_lens of shape (B,) and the same lengths repeated as (B, Tq)"


def check_stability(ctx):
    for case in ctx.of("stable"):
        got = ctx.outputs(case)
        for name, g in zip(ctx.problem.outputs, got):
            if not torch.isfinite(g).all():
                ctx.fail(case, f"{name} has NaN or inf with scores of magnitude ~1e4: subtract the row maximum before exp "
                         f"({'e - e.max()' if ctx.problem.arrays == 'numpy' else 'torch.softmax does this for you'})")
        compare_all(ctx, case, got, ctx.expected(case), STABILITY)


def check_side_effects(ctx):
    names = ctx.problem.arg_names
    for case in ctx.of("base") + ctx.of("f32"):
        res = ctx.result(case)
        if res["changed"]:
            ctx.fail(case, f"the call modified its input `{names[res['changed'][0]]}` in place; work on a copy "
                     "(masked_fill, not masked_fill_; x = x + 1, not x += 1)")
        for name, g in zip(ctx.problem.outputs, res["outputs"][0]):
            want = getattr(torch, case.call["dtype"])
            if g.dtype != want:
                how = ("no float64 constants: np.exp, @ and sums keep float32 when every operand is float32"
                       if ctx.problem.arrays == "numpy" else "use dtype=x.dtype or torch.*_like")
                ctx.fail(case, f"{name} came back as {str(g.dtype).replace('torch.', '')}, expected "
                         f"{str(want).replace('torch.', '')} (the inputs' dtype): create nothing with a fixed dtype ({how})")
        if any(d != "cpu" for d in res["devices"]):
            ctx.fail(case, f"outputs came back on {res['devices']}, expected the inputs' device (cpu)")


def check_dropout(ctx):
    tol = tolerance("float64")
    counts = {"kept": 0, "dropped": 0}
    for case in ctx.of("dropout"):
        if not case.call["train"]:
            first, second = ctx.outputs(case), ctx.outputs(case, 1)
            for name, a, b in zip(ctx.problem.outputs, first, second):
                if not torch.equal(a, b):
                    ctx.fail(case, f"two calls in eval() gave different {name}: dropout must do nothing in eval() mode "
                             "(use nn.Dropout, or F.dropout(..., training=self.training))", symptom="dropout_in_eval")
            compare_all(ctx, case, first, ctx.expected(case), tol)
            continue
        if "p" not in case.meta:  # the constructor's default dropout is 0.0: train() is exact too
            for name, g, e in zip(ctx.problem.outputs, ctx.outputs(case), ctx.expected(case)):
                bad = mismatch(name, g, e, tol)
                if bad:
                    ctx.fail(case, "constructed without `dropout`, train() must give exactly the eval() result "
                             f"(the default is dropout=0.0)\n{bad}")
            continue
        out, w = ctx.outputs(case)
        problem = mismatch("weights", w, ctx.expected(case)[-1], tol)
        if problem:
            ctx.fail(case, f"in train() the returned weights must be taken before dropout (they still sum to 1)\n{problem}",
                     symptom="weights_after_dropout")
        _judge_dropped(ctx, case, out, counts)
    if ctx.of("dropout") and (not counts["kept"] or not counts["dropped"]):
        case = [c for c in ctx.of("dropout") if c.call["train"]][-1]
        what = "every weight was kept" if counts["kept"] else "every weight was dropped"
        ctx.fail(case, f"over {sum(counts.values())} attention weights in train() with dropout=0.3 and 0.6, {what}: "
                 "dropout must zero each weight with probability p (a correct dropout does this by chance with "
                 "probability below 1e-7)")


def _judge_dropped(ctx, case, out, counts) -> None:
    """The output must be G(D * weights): solve it for the dropped weights P and check each P / weight."""
    reveal, p = ctx.ref[case.key]["reveal"], case.meta["p"]
    P, residual = dropped_weights(reveal, out)
    w = reveal["weights"]
    scale = 1.0 / (1.0 - p)
    if residual > 1e-7 * max(1.0, out.abs().max().item()):
        ctx.fail(case, f"in train() with dropout={p}, the output is not (dropout applied to the weights) @ values: "
                 f"no dropped weights explain it (off by {residual:.3g}). Dropout acts on the attention weights, "
                 "after the softmax and before they multiply the values; not on the scores, the values or the output",
                 symptom="dropout_misplaced")
    at_masked = (w == 0) & (P.abs() > 1e-9)
    if at_masked.any():
        at = tuple(at_masked.nonzero()[0].tolist())
        ctx.fail(case, f"in train() the dropped weights at masked key {list(at)} are {P[at].item():.6g}: a masked "
                 "weight is 0 and stays 0 after dropout")
    live = w > 1e-3  # the ratio P / w is well determined there
    ratio = P[live] / w[live]
    kept, dropped = (ratio - scale).abs() < 1e-6 * scale, ratio.abs() < 1e-6
    bad = ~(kept | dropped)
    if bad.any():
        others = ratio[bad]
        common = others.mean().item()
        same = (others - common).abs().max().item() < 1e-6 * abs(common) and common > 1
        why = (f"kept weights are scaled by {common:.6g} = 1/(1-{1 - 1 / common:.4g}), expected 1/(1-{p}) = {scale:.6g}: "
               f"dropout must use p = {p}, the module's `dropout` argument" if same else
               f"dropped weights / weights = {others[0].item():.6g} at a kept entry, expected 0 or 1/(1-p) = {scale:.6g}")
        ctx.fail(case, f"in train() with dropout={p}: {why}", symptom="dropout_wrong_p" if same else None)
    counts["kept"] += int(kept.sum())
    counts["dropped"] += int(dropped.sum())


def check_device(group: str):
    def judge(ctx):
        for case in ctx.of(group):
            res = ctx.result(case)
            if any(d != "cuda" for d in res["devices"]):
                ctx.fail(case, f"outputs came back on {res['devices']}, expected cuda (the inputs' device)")
            compare_all(ctx, case, ctx.outputs(case), ctx.expected(case), tolerance(case.call["dtype"]))

    return judge


CHECKS = {c.id: c for c in [
    Check("no_torch", "imports no torch (checked in a fresh Python)", ("imports",), check_no_torch),
    Check("parameters", "parameter names and shapes, constructor errors", ("ctor",), check_parameters),
    Check("value_errors", "invalid arguments raise ValueError", ("call_error",), check_value_errors),
    Check("shapes", "output shapes (B=1, Tk=1, Tq != Tk, ...)", ("base",), check_shapes),
    Check("weight_sums", "rows sum to 1, masked weights exactly 0", ("base",), check_weight_sums),
    Check("parity_float64", "same values as the reference, float64", ("base",), check_parity("base", "float64")),
    Check("parity_float32", "same values as the reference, float32", ("f32",), check_parity("f32", "float32")),
    Check("oracle", "same values as PyTorch's own implementation", ("base",), check_oracle),
    Check("gradients", "gradients of inputs and parameters", ("grad",), check_gradients),
    Check("masking", "masked keys ignored; key order; broadcast = expanded", ("mask",), check_masking),
    Check("stability", "finite and right for scores ~1e4 in float32", ("stable",), check_stability),
    Check("side_effects", "inputs untouched, dtype and device kept", ("base", "f32"), check_side_effects),
    Check("dropout", "eval() exact; train() drops; weights pre-dropout", ("dropout",), check_dropout),
    Check("memory", "largest allocation within max(max_elements, S)", ("memory",), check_memory),
    Check("cuda", "CUDA float64/float32 vs CPU reference", ("cuda",), check_device("cuda"), True),
    Check("cuda_half", "CUDA float16/bfloat16", ("half",), check_device("half"), True),
]}


def validate_checks(problem) -> None:
    """Every check id a spec gives points to is a registered check (else a SpecError naming spec and field)."""
    unknown = [cid for cid in problem.points if cid not in CHECKS]
    if unknown:
        raise SpecError(f"spec grader/problems/{problem.id}.py: field points: unknown check id {unknown[0]!r} "
                        f"(known: {', '.join(sorted(CHECKS))})")
