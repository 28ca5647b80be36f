"""Spec: FlashAttention's backward pass as Triton kernels (dQ, dK, dV from the saved lse, with the D = rowsum(dO * O)
pre-pass), graded through Triton's interpreter on any machine."""
import math

import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import LLM_BANNED, amplify_qk
from .attention_backward import PROBLEM as ATTENTION_BACKWARD
from .attention_backward import _oracle as _autograd_oracle
from .triton_flash_attention import PROBLEM as FORWARD
from .triton_flash_attention import _fit, _keys_per_query_block

DS = "ds = p * (dp - delta[:, None])  # through the softmax: dS = P * (dP - rowsum(dO * O))"
DELTA = "delta = tl.sum(o.to(work) * do.to(work), 1)"
P = "p = tl.where(allowed, tl.exp(s - tl.where(allowed, lse[:, None], s)), 0.0)  # P; 0 off the allowed keys"
DK = "dk += tl.dot(tl.trans(ds).to(q.dtype), q).to(work) * scale"
DP = "dp = tl.dot(do, tl.trans(v)).to(work)"
ATOMIC = "tl.atomic_add(DQ + head * Tq * D + rows[:, None] * D + feats[None, :], dq.to(DQ.dtype.element_ty),"
FIRST = "first = tl.maximum(start_n * BLOCK_N - shift, 0)  # the first query that sees this block's first key"
M_BEGIN = "m_begin = (first // BLOCK_M) * BLOCK_M"
ALLOWED = "allowed = allowed & (cols[None, :] <= rows[:, None] + shift)"
Q_LOAD = "q = tl.load(Q + head * Tq * D + rows[:, None] * D + feats[None, :], mask=rows[:, None] < Tq, other=0.0)"
K_LOAD = "k = tl.load(K + head * Tk * D + cols[:, None] * D + feats[None, :], mask=cols[:, None] < Tk, other=0.0)"
V_LOAD = "v = tl.load(V + head * Tk * D + cols[:, None] * D + feats[None, :], mask=cols[:, None] < Tk, other=0.0)"
DK_STORE = ("tl.store(DK + head * Tk * D + cols[:, None] * D + feats[None, :], dk.to(DK.dtype.element_ty), "
            "mask=cols[:, None] < Tk)")
DELTA_LOAD = "delta = tl.load(DELTA + head * Tq + rows, mask=rows < Tq, other=0.0)"
DQ_ALLOC = "dq = torch.zeros(q.shape, dtype=work, device=q.device)  # accumulated with atomics: starts at 0"
SIGNATURE = "def _attention_backward_kv(Q, K, V, DO, LSE, DELTA, DQ, DK, DV, Tq, Tk, scale,"
LAUNCH = "(q, k, v, do, lse, delta, dq, dk, dv, Tq, Tk, d ** -0.5,"
PREPASS = "_attention_backward_delta[(triton.cdiv(Tq, BLOCK_M), B * H)](o, do, delta, Tq, D=d, BLOCK_M=BLOCK_M)"

MISTAKES = (
    Mistake("no_delta", "the rowsum(dO * O) term missing: dS = P * dP",
            ((DS, "ds = p * dp"),),
            explain="The softmax's Jacobian is diag(P) - P P^T per row: dS = P * (dP - rowsum(P * dP)), and "
                    "rowsum(P * dP) = rowsum(dO * O) = D, what the pre-pass computes. Without it every row of dS is "
                    "off by P times D.",
            hint="ds = p * (dp - delta[:, None]), delta loaded per query block from the pre-pass's output."),
    Mistake("delta_without_o", "the pre-pass computes D = rowsum(dO) instead of rowsum(dO * O)",
            ((DELTA, "delta = tl.sum(do.to(work), 1)"),),
            explain="D is the weighted mean of dP under P, rowsum(P * dP), which equals rowsum(dO * O): the output's "
                    "own row enters it. The plain row sum of dO is another number.",
            hint="delta = tl.sum(o * do, 1), o and do loaded as (BLOCK_M, D) tiles."),
    Mistake("lse_unused", "P recomputed as exp(S) without subtracting the saved lse",
            ((P, "p = tl.where(allowed, tl.exp(s), 0.0)"),),
            explain="The forward saved lse = logsumexp of each row's scores so that the backward can recompute the "
                    "normalised P = exp(S - lse) one block at a time; exp(S) alone is neither normalised nor safe "
                    "(it overflows at scores of 1e4).",
            hint="p = tl.exp(s - lse[:, None]) on the allowed keys, 0 elsewhere."),
    Mistake("dq_not_atomic", "dQ stored by each key block instead of accumulated with atomics",
            ((ATOMIC, ATOMIC.replace("tl.atomic_add(", "tl.store(")),),
            explain="Each program owns one key block, and every key block adds its share dS K / sqrt(d) to the same "
                    "rows of dQ: a plain store keeps only the last block's share (on a GPU, whichever program wrote "
                    "last). The shares must be summed: tl.atomic_add into a zeroed float32 buffer, or a second kernel "
                    "that owns the query blocks.",
            hint="tl.atomic_add(dq_ptrs, dq_block, mask=rows[:, None] < Tq), dq = torch.zeros(...) in the launcher."),
    Mistake("dq_buffer_float32", "dQ accumulated in float32 for float64 inputs",
            ((DQ_ALLOC, "dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)"),),
            explain="The atomics' buffer holds the gradient while it is summed: in float32 it keeps 7 digits, so "
                    "float64 inputs get float32-accurate gradients (1e-7, where float64 asks 1e-10).",
            hint="dq = torch.zeros(q.shape, dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)."),
    Mistake("dk_no_scale", "dK missing the 1/sqrt(d) scale", ((DK, DK.replace(" * scale", "")),),
            explain="S = Q K^T / sqrt(d): the scale passes into dK = dS^T Q / sqrt(d) as into dQ.",
            hint="dk += tl.dot(tl.trans(ds), q) * scale."),
    Mistake("dp_from_keys", "dP computed from the keys instead of the values: dO K^T",
            ((DP, "dp = tl.dot(do, tl.trans(k)).to(work)"),),
            explain="O = P V, so dP = dO V^T: the values the probabilities mixed, not the keys they were scored by.",
            hint="dp = tl.dot(do, tl.trans(v))."),
    Mistake("causal_start_late", "the causal loop starts one query block late: the block with the first query that "
            "sees the keys is skipped",
            ((M_BEGIN, "m_begin = (first // BLOCK_M + 1) * BLOCK_M"),),
            explain="Key j is seen by queries i >= j - (Tk - Tq): the loop over query blocks starts at the block "
                    "holding that first query, floor(first / BLOCK_M) * BLOCK_M, not the one after.",
            hint="m_begin = (max(start_n * BLOCK_N - (Tk - Tq), 0) // BLOCK_M) * BLOCK_M."),
    Mistake("causal_no_skip", "causal attention loads every query block, even those that see none of the keys",
            ((M_BEGIN, "m_begin = 0"),),
            explain="Query blocks wholly before key block j's first query see none of its keys: loading them is right "
                    "but moves about twice the memory the causal backward needs.",
            hint="Start the query loop at (max(start_n * BLOCK_N - (Tk - Tq), 0) // BLOCK_M) * BLOCK_M."),
    Mistake("causal_top_left", "causal mask aligned to the top left (j <= i) instead of the bottom right",
            ((ALLOWED, "allowed = allowed & (cols[None, :] <= rows[:, None])"),
             (FIRST, "first = start_n * BLOCK_N")),
            explain="With Tq != Tk the queries are the last Tq positions of the Tk keys: query i sees key j when "
                    "j <= i + (Tk - Tq), in the backward as in the forward that saved lse.",
            hint="allowed = cols <= rows + (Tk - Tq)."),
    Mistake("empty_rows_nan", "rows with no allowed key give NaN: exp(-inf - lse) with lse = -inf",
            ((P, "p = tl.exp(tl.where(allowed, s, float(\"-inf\")) - lse[:, None])"),),
            explain="A query with no allowed key (causal with Tq > Tk) has lse = -inf: exp(-inf - (-inf)) is NaN, and "
                    "it spreads into dK and dV through the atomics and the dots. Such a row contributes nothing.",
            hint="p = tl.where(allowed, tl.exp(s - lse[:, None]), 0.0), with lse replaced where not allowed."),
    Mistake("kv_reloaded", "the key and value tiles loaded again for every query block",
            ((K_LOAD, "k = tl.zeros([BLOCK_N, D], dtype=K.dtype.element_ty)"),
             (V_LOAD, "v = tl.zeros([BLOCK_N, D], dtype=V.dtype.element_ty)"),
             ("        rows = start_m + offs_m\n", "        rows = start_m + offs_m\n        " + K_LOAD + "\n        "
              + V_LOAD + "\n")),
            explain="A program's key and value tiles stay on the chip for its whole loop over query blocks: loading "
                    "them per query block moves Tq / BLOCK_M times their memory.",
            hint="Load k and v once, before the loop over query blocks."),
    Mistake("delta_prepass_missing", "D = rowsum(dO * O) recomputed from O inside the main loop: no pre-pass",
            ((PREPASS, "pass  # no pre-pass: D is computed in the main loop"),
             (SIGNATURE, SIGNATURE.replace("DELTA,", "DELTA, O,")),
             (LAUNCH, LAUNCH.replace("delta,", "delta, o,")),
             (DELTA_LOAD, "o = tl.load(O + head * Tq * D + rows[:, None] * D + feats[None, :], mask=rows[:, None] < "
                          "Tq, other=0.0)\n        delta = tl.sum(o.to(work) * do.to(work), 1)")),
            explain="Every key block's program needs D for the same query rows: computing it inside the loop loads the "
                    "whole output tile O once per key block, where a pre-pass loads it once and stores one number "
                    "per row.",
            hint="A first kernel over query blocks: delta = tl.sum(o * do, 1), stored as (B * H, Tq); the main kernel "
                 "loads one number per row."),
    Mistake("unmasked_query_load", "the queries of the last, partial query block loaded without a mask",
            ((Q_LOAD, "q = tl.load(Q + head * Tq * D + rows[:, None] * D + feats[None, :])"),),
            explain="When BLOCK_M does not divide Tq the last query block runs past the end of the queries: an "
                    "unmasked load reads whatever memory follows (another head's queries, or nothing mapped on a "
                    "GPU).",
            hint="tl.load(ptrs, mask=rows[:, None] < Tq, other=0.0)."),
    Mistake("unmasked_dk_store", "dK of the last, partial key block stored without a mask",
            ((DK_STORE, DK_STORE.replace(", mask=cols[:, None] < Tk)", ")")),),
            explain="When BLOCK_N does not divide Tk the last key block's rows past Tk belong to the next head or to "
                    "no tensor at all: storing them writes there.",
            hint="tl.store(ptrs, value, mask=cols[:, None] < Tk)."),
    Mistake("scores_to_global", "the block's probabilities written to a (Tq, Tk) buffer in global memory",
            ((SIGNATURE, SIGNATURE.replace("DV,", "DV, PS,")),
             (P, P + "\n        tl.store(PS + head * Tq * Tk + rows[:, None] * Tk + cols[None, :], p, "
                     "mask=(rows[:, None] < Tq) & (cols[None, :] < Tk))"),
             (LAUNCH, LAUNCH.replace("dv,", "dv, torch.empty((B * H, Tq, Tk), dtype=work, device=q.device),"))),
            explain="FlashAttention's backward recomputes P block by block from the saved lse so that the (Tq, Tk) "
                    "matrix never reaches global memory: the values are right, the traffic is what the tiling was "
                    "meant to save.",
            hint="Keep p and ds in registers; store only dK, dV and dQ."),
    Mistake("dq_flattened", "dQ allocated as (B * H, Tq, d)",
            ((DQ_ALLOC, "dq = torch.zeros((B * H, Tq, d), dtype=work, device=q.device)"),),
            explain="The kernels address a contiguous (B * H, Tq, d) buffer either way, but the gradient has the "
                    "queries' shape, (B, H, Tq, d).",
            hint="dq = torch.zeros(q.shape, ...)."),
    Mistake("dk_over_keys", "dK written over the keys' memory (dk = k)",
            (("    dk, dv = torch.empty_like(k), torch.empty_like(v)\n",
              "    dk, dv = k, torch.empty_like(v)  # written in place\n"),),
            explain="Each program loads its key tile before it stores its rows of dK, so the values come out right, "
                    "but the caller's k is overwritten: the function must leave its inputs as they were.",
            hint="dk = torch.empty_like(k): a tensor of its own for the kernel to store into."),
    Mistake("blocks_not_checked", "block sizes that are no power of two (or below 16) accepted",
            (("    if not (_power_of_two(BLOCK_M) and _power_of_two(BLOCK_N)):\n", "    if False:\n"),),
            explain="tl.arange needs a power of two and tl.dot tiles of at least 16 on a GPU; the contract raises "
                    "ValueError before launching.",
            hint="if BLOCK_M < 16 or BLOCK_M & (BLOCK_M - 1): raise ValueError(...)."),
)


def forward(q, k, v, causal):
    """float64 (output, lse) of attention with the bottom-right causal rule; a row with no allowed key: 0 and -inf."""
    Tq, Tk = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if causal:
        s = s.masked_fill(~torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq), float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0.0)[..., None])
    return p @ v, lse


def _settle(call, cfg):
    """o and lse, the forward's outputs, computed from the call's q, k, v and is_causal as rounded (in float64, o then
    rounded to the call's dtype, lse to float32, float64 for float64): whichever check built or moved the call."""
    args = call.get("args") or []
    if len(args) < 6 or not all(isinstance(a, torch.Tensor) and a.dim() == 4 for a in (*args[:4], args[5])):
        return
    q, k, v = (a.double() for a in args[:3])
    o, lse = forward(q, k, v, bool(args[6]) if len(args) > 6 else False)
    dt = args[0].dtype
    call["args"] = [*args[:3], o.to(dt), lse.to(torch.float64 if dt == torch.float64 else torch.float32), *args[5:]]


def _inputs(cfg, gen):
    """q, k, v, o, lse, do: o and lse are placeholders until `settle` computes them (is_causal is drawn later)."""
    lead = [cfg["B"], cfg["H"]]
    q, k, v, do = (torch.randn(*lead, cfg[t], cfg["dq"], generator=gen, dtype=torch.float64)
                   for t in ("Tq", "Tk", "Tk", "Tq"))
    return [q, k, v, torch.zeros_like(q), torch.zeros(*lead, cfg["Tq"], dtype=torch.float64), do]


def _rows_per_key_block(Tq, Tk, causal, bm, bn):
    """For each key block of BLOCK_N keys, the query rows from the first query block that sees any of its keys."""
    shift = Tk - Tq
    return [Tq - (min(Tq, (max(j * bn - shift, 0) // bm) * bm) if causal else 0) for j in range(math.ceil(Tk / bn))]


def _io(cfg, args):
    """Per design (which outputs the kernels accumulate with atomics), the most elements loaded and stored: a pre-pass
    over O and dO storing D; per key block its K and V once, and per query block that sees it q, dO, lse and D."""
    q, k = args[0], args[1]
    causal, bm, bn = bool(args[6]), args[7], args[8]
    L, Tq, d = q.shape[0] * q.shape[1], q.shape[2], q.shape[3]
    Tk = k.shape[2]
    rows = sum(_rows_per_key_block(Tq, Tk, causal, bm, bn))
    keys = sum(_keys_per_query_block(Tq, Tk, causal, bm, bn))
    pre = (2 * Tq * d, Tq)
    kv = (2 * Tk * d + rows * (2 * d + 2), 2 * Tk * d)
    per_query = Tq * (2 * d + 2)  # a program per query block: its q, dO, lse and D once
    designs = {
        "dq": (pre[0] + kv[0] + rows * d, pre[1] + kv[1] + rows * d),  # each update loads and stores
        "": (pre[0] + kv[0] + per_query + 2 * keys * d, pre[1] + kv[1] + Tq * d),
        "dk,dv": (pre[0] + per_query + 4 * keys * d, pre[1] + Tq * d + 2 * keys * d),
    }
    return {name: (L * a, L * b) for name, (a, b) in designs.items()}


DESIGNS = {
    "dq": "dK and dV by a program per key block, dQ added with atomics: the pre-pass over O and dO, each key and value "
          "tile once, and per key block the q, dO, lse and D of each query block that sees it, and its dQ update",
    "": "dK and dV by a program per key block, dQ by a program per query block: the pre-pass, each key and value tile "
        "once and per key block the q, dO, lse and D of each query block that sees it; each q, dO, lse and D once and "
        "per query block the key and value tiles up to its last allowed key",
    "dk,dv": "a program per query block, dK and dV added with atomics: the pre-pass, each q, dO, lse and D once, and "
             "per query block the key and value tiles up to its last allowed key and their dK and dV updates",
}


def _oracle(call):
    """autograd through F.scaled_dot_product_attention with the bottom-right causal mask (o and lse unused)"""
    q, k, v, _o, _lse, do, causal = (list(call["args"]) + [False])[:7]
    return _autograd_oracle({"args": [q, k, v, do, causal]})


PROBLEM = Problem(
    id="triton_flash_attention_backward",
    title="FlashAttention backward in Triton",
    summary="FlashAttention's backward as Triton kernels: dQ, dK, dV from the saved lse with the D = rowsum(dO * O) "
            "pre-pass; graded through Triton's interpreter for values, memory traffic and bounds, and compiled for "
            "sm_80/sm_90.",
    symbol="triton_flash_attention_backward",
    imports=FORWARD.imports,
    points=dict(FORWARD.points),
    hints=(
        "Two kernels: a pre-pass over query blocks computing D = rowsum(dO * O) (one number per row), then one "
        "program per key block of BLOCK_N keys, grid (cdiv(Tk, BLOCK_N), B * H), that loads its k and v once and "
        "loops over the query blocks of BLOCK_M rows that see them, keeping dk and dv on the chip.",
        "Per query block: s = tl.dot(q, tl.trans(k)) * scale; p = exp(s - lse[:, None]) on the allowed keys, 0 "
        "elsewhere; dv += tl.dot(tl.trans(p), do); dp = tl.dot(do, tl.trans(v)); ds = p * (dp - D[:, None]); "
        "dk += tl.dot(tl.trans(ds), q) * scale; and that block's share of dq, tl.dot(ds, k) * scale, added with "
        "tl.atomic_add into a zeroed float32 (float64) buffer.",
        "Causal: the first query that sees key block j's first key is max(j * BLOCK_N - (Tk - Tq), 0): start the "
        "loop at its query block, and mask cols <= rows + (Tk - Tq) inside. A row with no allowed key has lse = -inf: "
        "take p = 0 there, never exp(-inf - (-inf)). Mask every load and store of a partial block.",
    ),
    methods=(
        Method(
            signature="def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, "
                      "BLOCK_N=64):",
            statement=(
                "The gradients of sum(O * do) with respect to q, k and v, where O = softmax(q k^T / sqrt(d)) v over\n"
                "the allowed keys (section 22's rule) and (o, lse) are what triton_flash_attention returned for\n"
                "them: P = exp(q k^T / sqrt(d) - lse) on the allowed keys (0 elsewhere, and on a row whose lse is\n"
                "-inf), dV = P^T do, dS = P * (do v^T - D) with D = rowsum(do * o), dQ = dS k / sqrt(d),\n"
                "dK = dS^T q / sqrt(d). The file defines @triton.jit kernels and this launcher: a pre-pass kernel\n"
                "computes D, and the main kernels recompute P block by block from lse (no score matrix in global\n"
                "memory). Grid: a program per BLOCK_N keys that loops over query blocks of BLOCK_M rows (dK, dV),\n"
                "and dQ either added by those programs with tl.atomic_add into a zeroed buffer, or computed by a\n"
                "program per BLOCK_M queries looping over key blocks of BLOCK_N; or a program per query block with\n"
                "dK and dV added with atomics. Each tile loaded at most once per block that needs it (causal: never\n"
                "a block that sees none of the other's keys). Every load and store stays inside its tensor.\n"
                "BLOCK_M and BLOCK_N are powers of two of at least 16 (else ValueError); d is 16, 32, 64 or 128.\n"
                "Triton's language only, as in section 22; no automatic differentiation and no torch attention."
            ),
            args=(Arg("q", "(B, H, Tq, d)", "query"), Arg("k", "(B, H, Tk, d)", "key"),
                  Arg("v", "(B, H, Tk, d)", "value"),
                  Arg("o", "(B, H, Tq, d): the forward's output", "tensor"),
                  Arg("lse", "(B, H, Tq): the forward's lse, float32 (float64 for float64 inputs)", "tensor"),
                  Arg("do", "(B, H, Tq, d): the gradient of the output", "tensor"),
                  Arg("is_causal", "bool: key j allowed for query i when j <= i + (Tk - Tq)", "causal"),
                  Arg("BLOCK_M", "queries per block (a power of two, >= 16)", "scalar"),
                  Arg("BLOCK_N", "keys per block (a power of two, >= 16)", "scalar")),
            returns=(Out("dq", "(B, H, Tq, d), q's dtype", "gradient"),
                     Out("dk", "(B, H, Tk, d), k's dtype", "gradient"),
                     Out("dv", "(B, H, Tk, d), v's dtype", "gradient")),
        ),
    ),
    variants=FORWARD.variants,
    fit=_fit,
    inputs=_inputs,
    trailing=FORWARD.trailing,
    settle=_settle,  # no `negative`: with every score near -1e4 the gradients are ill-conditioned in float32
    traced=False,
    options={
        **FORWARD.options,
        "traffic": {**FORWARD.options["traffic"], "io": _io, "designs": DESIGNS,
                    "words": "the pre-pass over O and dO, and each tile once per block that needs it"},
        "stability": {"amplify": amplify_qk},  # o and lse follow q and k: `settle`
        "oracle": {"call": _oracle},
        # the backward's usual tiles (FlashAttention-2): 32 queries per step against a program's 64 keys
        "onchip": {"call": lambda cfg: ({"B": 1, "H": 2, "Tq": 256, "Tk": 256, "dq": 64, "dk": 64, "dv": 64, "d": 64},
                                        {"BLOCK_M": 32, "BLOCK_N": 64}, "float16"),
                   "dtypes": lambda args: (args[0].dtype, args[1].dtype, args[2].dtype)},
    },
    mistakes=MISTAKES,
    banned=tuple(dict.fromkeys(LLM_BANNED + ATTENTION_BACKWARD.banned)),
    track="kernels",
    after=("triton_flash_attention", "attention_backward"),
    needs=FORWARD.needs,
)
