"""Spec: FlashAttention's forward pass as a Triton kernel, graded through Triton's interpreter on any machine."""
import math

import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import LLM_BANNED, amplify_qk, lead_fit, lead_inputs, negative_qk
from .flash_attention import _oracle

ACC = "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v).to(work)"
K_END = "k_end = tl.minimum(Tk, (start_m + 1) * BLOCK_M + shift)"
K_LOAD = "k = tl.load(K + head * Tk * D + cols[:, None] * D + feats[None, :], mask=cols[:, None] < Tk, other=0.0)"
Q_LOAD = "q = tl.load(Q + head * Tq * D + rows[:, None] * D + feats[None, :], mask=rows[:, None] < Tq, other=0.0)"
LSE = 'lse = tl.where(empty, float("-inf"), m_i + tl.log(tl.where(empty, 1.0, l_i)))'
O_STORE = ("tl.store(O + head * Tq * D + rows[:, None] * D + feats[None, :], out.to(O.dtype.element_ty), "
           "mask=rows[:, None] < Tq)")
LAUNCH = "_attention_forward[grid](q, k, v, out, lse, Tq, Tk, d ** -0.5,"
SIGNATURE = "def _attention_forward(Q, K, V, O, LSE, Tq, Tk, scale,"
SCORE = "s = tl.dot(q, tl.trans(k)).to(work) * scale"

MISTAKES = (
    Mistake("no_rescale_acc", "the accumulator not rescaled when the running max changes",
            ((ACC, "acc = acc + tl.dot(p.to(v.dtype), v).to(work)"),),
            explain="Each key block's p = exp(s - m_new) is relative to the new running max; what acc holds was summed "
                    "relative to the old one and must be multiplied by alpha = exp(m_old - m_new) first.",
            hint="acc = acc * alpha[:, None] + tl.dot(p, v), with alpha = tl.exp(m_i - m_new)."),
    Mistake("no_rescale_sum", "the running sum not rescaled when the running max changes",
            (("l_i = l_i * alpha + tl.sum(p, 1)", "l_i = l_i + tl.sum(p, 1)"),),
            explain="The running sum of exponentials is relative to the running max, like the accumulator: when the max "
                    "grows, the old sum must shrink by alpha = exp(m_old - m_new).",
            hint="l_i = l_i * alpha + tl.sum(p, 1)."),
    Mistake("lse_without_max", "lse = log(sum) without adding the running max back",
            ((LSE, LSE.replace("m_i + tl.log(", "tl.log(")),),
            explain="The running sum is of exp(s - m): its log is logsumexp(s) - m, so lse = m + log(l).",
            hint="lse = m_i + tl.log(l_i)."),
    Mistake("causal_skip_short", "the causal loop stops one query block early: the diagonal block is never loaded",
            ((K_END, "k_end = tl.minimum(Tk, start_m * BLOCK_M + shift)"),),
            explain="Query block i holds rows i*BLOCK_M to (i+1)*BLOCK_M - 1; its last row may see keys up to "
                    "(i+1)*BLOCK_M - 1 + (Tk - Tq). Stopping at i*BLOCK_M + shift drops the block on the diagonal.",
            hint="k_end = min(Tk, (start_m + 1) * BLOCK_M + (Tk - Tq)); mask inside the diagonal block."),
    Mistake("causal_no_skip", "causal attention loads every key block, even those wholly above the diagonal",
            ((K_END, "k_end = Tk"),),
            explain="Keys after (i+1)*BLOCK_M - 1 + (Tk - Tq) are masked for every row of query block i: loading "
                    "them is right but moves about twice the memory the causal kernel needs.",
            hint="Stop the key loop at min(Tk, (start_m + 1) * BLOCK_M + (Tk - Tq))."),
    Mistake("causal_skip_long", "the causal loop runs one key block too far",
            ((K_END, "k_end = tl.minimum(Tk, (start_m + 1) * BLOCK_M + shift + BLOCK_N)"),),
            explain="The last key a row of query block i may see is (i+1)*BLOCK_M - 1 + (Tk - Tq): one block more is "
                    "loaded and then wholly masked.",
            hint="k_end = min(Tk, (start_m + 1) * BLOCK_M + (Tk - Tq)), with no extra block."),
    Mistake("unmasked_key_load", "the keys of the last, partial block loaded without a mask",
            ((K_LOAD, "k = tl.load(K + head * Tk * D + cols[:, None] * D + feats[None, :])"),),
            explain="When BLOCK_N does not divide Tk the last key block runs past the end of the keys: an unmasked "
                    "load reads whatever memory follows (another head's keys, or nothing mapped on a GPU).",
            hint="tl.load(ptrs, mask=cols[:, None] < Tk, other=0.0)."),
    Mistake("unmasked_output_store", "the output of the last, partial query block stored without a mask",
            ((O_STORE, O_STORE.replace(", mask=rows[:, None] < Tq)", ")")),),
            explain="When BLOCK_M does not divide Tq the last query block's rows past Tq belong to the next head or "
                    "to no tensor at all: storing them writes there.",
            hint="tl.store(ptrs, value, mask=rows[:, None] < Tq)."),
    Mistake("query_reloaded", "the query tile loaded again for every key block",
            ((Q_LOAD, "q = tl.zeros([BLOCK_M, D], dtype=Q.dtype.element_ty)"),
             ("        cols = start_n + offs_n\n", "        cols = start_n + offs_n\n        " + Q_LOAD + "\n")),
            explain="A program's query tile stays on the chip for its whole key loop: loading it per key block moves "
                    "Tk / BLOCK_N times the queries' memory.",
            hint="Load q once, before the loop over key blocks."),
    Mistake("scores_to_global", "the block's scores written to a (Tq, Tk) buffer in global memory",
            ((SIGNATURE, "def _attention_forward(Q, K, V, O, LSE, S, Tq, Tk, scale,"),
             (SCORE, SCORE + "\n        tl.store(S + head * Tq * Tk + rows[:, None] * Tk + cols[None, :], s, "
                             "mask=(rows[:, None] < Tq) & (cols[None, :] < Tk))"),
             (LAUNCH, "scores = torch.empty((B * H, Tq, Tk), dtype=torch.float64 if q.dtype == torch.float64 else "
                      "torch.float32, device=q.device)\n    _attention_forward[grid](q, k, v, out, lse, scores, Tq, Tk, d ** -0.5,")),
            explain="FlashAttention exists to never write the (Tq, Tk) scores to global memory: the values are right, "
                    "but the memory traffic is what the tiling was meant to save.",
            hint="Keep s in registers: use it for m, l and acc, and never tl.store it."),
    Mistake("causal_top_left", "causal mask aligned to the top left (j <= i) instead of the bottom right",
            (("allowed = allowed & (cols[None, :] <= rows[:, None] + shift)",
              "allowed = allowed & (cols[None, :] <= rows[:, None])"),
             (K_END, "k_end = tl.minimum(Tk, (start_m + 1) * BLOCK_M)")),
            explain="With Tq != Tk the queries are the last Tq positions of the Tk keys: query i sees key j when "
                    "j <= i + (Tk - Tq).",
            hint="allowed = cols <= rows + (Tk - Tq)."),
    Mistake("no_scaling", "scores not scaled by 1/sqrt(d)", ((SCORE, "s = tl.dot(q, tl.trans(k)).to(work)"),),
            explain="Scores are q . k / sqrt(d), in the output and in the lse alike.",
            hint="s = tl.dot(q, tl.trans(k)) * scale, scale = d ** -0.5 from the launcher."),
    Mistake("empty_rows_nan", "rows with no allowed key come out NaN (0 / 0)",
            (("out = acc / tl.where(empty, 1.0, l_i)[:, None]", "out = acc / l_i[:, None]"),),
            explain="A query with no allowed key (causal with Tq > Tk) has a running sum of 0: dividing gives NaN; its "
                    "output must be 0.",
            hint="out = acc / tl.where(l_i == 0, 1.0, l_i)[:, None]."),
    Mistake("max_init_zero", "running max started at 0 instead of -inf",
            (('m_i = tl.full([BLOCK_M], float("-inf"), dtype=work)', "m_i = tl.zeros([BLOCK_M], dtype=work)"),),
            explain="With every score far below 0 (say -1e4) a max that starts at 0 makes every exp(s - m) underflow "
                    "to 0: the sum is 0 and the row comes out wrong.",
            hint='m_i = tl.full([BLOCK_M], float("-inf"), ...); guard exp(s - m) while the max is still -inf.'),
    Mistake("lse_keepdim", "lse allocated with a trailing axis of 1: (B, H, Tq, 1)",
            (("lse = torch.empty((B, H, Tq), dtype=", "lse = torch.empty((B, H, Tq, 1), dtype="),),
            explain="lse has one number per query row, (B, H, Tq), like the output without its feature axis; the "
                    "kernel stores the same numbers either way, but a backward pass indexes lse as (B, H, Tq).",
            hint="lse = torch.empty((B, H, Tq), ...), and store it at LSE + head * Tq + rows."),
    Mistake("output_over_queries", "the output written over the queries' memory (out = q)",
            (("    out = torch.empty_like(q)\n", "    out = q  # written in place\n"),),
            explain="Each program loads its query tile before it stores its output rows, so the values come out "
                    "right, but the caller's q is overwritten: the function must leave its inputs as they were.",
            hint="out = torch.empty_like(q): a tensor of its own for the kernel to store into."),
    Mistake("blocks_not_checked", "block sizes that are no power of two (or below 16) accepted",
            (("    if not (_power_of_two(BLOCK_M) and _power_of_two(BLOCK_N)):\n", "    if False:\n"),),
            explain="tl.arange needs a power of two and tl.dot tiles of at least 16 on a GPU; the contract raises "
                    "ValueError before launching.",
            hint="if BLOCK_M < 16 or BLOCK_M & (BLOCK_M - 1): raise ValueError(...)."),
)


def _fit(cfg, variant):
    """Rank 4 (B, H, T, d) with d = the variant's; T > 1 stretched to 3T + 2 (17 to 35: partial blocks of 16 and 32);
    B * H at most 2 (each program interpreted costs time: the kernel sees B * H heads alike, and two of them test
    the offset from one head to the next)."""
    grow = {t: (cfg[t] if cfg[t] == 1 else 3 * cfg[t] + 2) for t in ("Tq", "Tk")}
    heads = {"B": min(cfg["B"], 2), "H": 1 if cfg["B"] > 1 else min(cfg["H"], 2)}
    d = cfg.get("head_dim", variant["d"])  # a shape of the traffic check's own (LONG)
    return lead_fit({**cfg, **grow, **heads, "dq": d, "dv": d}, {"rank": 4, **variant})


LONG = {"B": 1, "H": 1, "Tq": 40, "Tk": 66, "head_dim": 64, "args": {"BLOCK_M": 64, "BLOCK_N": 64}}
"""A GPU-sized call (Tq = 122, Tk = 200 after the fit, d = 64, blocks of 64): a kernel right on the short calls only
(its key loop capped, a head dimension assumed) goes wrong here."""


def _trailing(cfg):
    return [cfg["BLOCK_M"], cfg["BLOCK_N"]]


def _inputs(cfg, gen):
    return lead_inputs(cfg, gen, ("Tq", "dq"), ("Tk", "dq"), ("Tk", "dv"))


def _io(cfg, args):
    """Q once, and per query block the key and value tiles up to its last allowed key; the output and lse once."""
    q, k = args[0], args[1]
    causal, bm, bn = bool(args[3]), args[4], args[5]
    L, Tq, d = q.shape[0] * q.shape[1], q.shape[2], q.shape[3]
    keys = sum(_keys_per_query_block(Tq, k.shape[2], causal, bm, bn))
    return L * (Tq * d + 2 * keys * d), L * (Tq * d + Tq)


def _keys_per_query_block(Tq, Tk, causal, bm, bn):
    """For each query block of BLOCK_M rows, the keys up to its last allowed one, in whole blocks of BLOCK_N."""
    ends = [min(Tk, (i + 1) * bm + Tk - Tq) if causal else Tk for i in range(math.ceil(Tq / bm))]
    return [min(math.ceil(max(end, 0) / bn) * bn, Tk) for end in ends]


PROBLEM = Problem(
    id="triton_flash_attention",
    title="FlashAttention forward in Triton",
    summary="FlashAttention's forward as a Triton kernel: online softmax in tiles, (output, lse), causal bottom right; "
            "graded through Triton's interpreter for values, memory traffic and bounds, and compiled for sm_80/sm_90.",
    symbol="triton_flash_attention",
    imports="import torch\nimport triton\nimport triton.language as tl\n",
    points={"shapes": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 2, "block_invariance": 2, "stability": 1,
            "side_effects": 1, "traffic": 2, "bounds": 1, "onchip": 1, "value_errors": 1, "capabilities": 1},
    hints=(
        "Write one @triton.jit kernel run on a grid of (cdiv(Tq, BLOCK_M), B * H) programs: each loads its query tile "
        "once, loops over key blocks of BLOCK_N keys keeping a running max m, a running sum l and an accumulator acc "
        "on the chip, and stores its rows of the output and lse once.",
        "Per key block: s = tl.dot(q, tl.trans(k)) * scale; m_new = max(m, tl.max(s, 1)); alpha = exp(m - m_new); "
        "p = exp(s - m_new); l = l * alpha + tl.sum(p, 1); acc = acc * alpha[:, None] + tl.dot(p, v). At the end "
        "out = acc / l, lse = m + log(l). Causal: stop the loop at min(Tk, (i + 1) * BLOCK_M + Tk - Tq) and mask "
        "cols <= rows + (Tk - Tq) inside.",
        "Mask every load and store of a partial block (mask=rows < Tq, mask=cols < Tk, other=0.0), and scores of "
        "keys past Tk with -inf; m starts at -inf and a row whose max is still -inf uses 0 in exp(s - m); a row with "
        "no allowed key (l == 0) stores output 0 and lse -inf.",
    ),
    methods=(
        Method(
            signature="def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):",
            statement=(
                "output = softmax(q k^T / sqrt(d)) v over the allowed keys; lse = logsumexp of each row's scaled\n"
                "scores over its allowed keys. is_causal: key j is allowed for query i when j <= i + (Tk - Tq)\n"
                "(aligned to the bottom right); a row with no allowed key has output 0 and lse -inf.\n"
                "The file defines one or more @triton.jit kernels and this launcher, which allocates the outputs\n"
                "and launches the kernels; the kernels compute every element of output and lse and store each once.\n"
                "Memory traffic: the kernels load each query tile once and each key and value tile at most once per\n"
                "query block that needs it (causal: never a key block wholly above the diagonal); no other global\n"
                "memory is written (no score matrix). Every load and store stays inside its tensor (mask partial\n"
                "blocks). BLOCK_M and BLOCK_N are powers of two of at least 16 (else ValueError); d is 16, 32, 64 or\n"
                "128. Triton's language only (triton.language, triton.jit, triton.cdiv): no autotuning, no inline\n"
                "assembly, nothing of triton.runtime or triton.compiler; no torch attention in the launcher."
            ),
            args=(Arg("q", "(B, H, Tq, d)", "query"), Arg("k", "(B, H, Tk, d)", "key"),
                  Arg("v", "(B, H, Tk, d)", "value"),
                  Arg("is_causal", "bool: key j allowed for query i when j <= i + (Tk - Tq)", "causal"),
                  Arg("BLOCK_M", "queries per program (a power of two, >= 16)", "scalar"),
                  Arg("BLOCK_N", "keys per inner step (a power of two, >= 16)", "scalar")),
            returns=(Out("output", "(B, H, Tq, d), q's dtype", "values"),
                     Out("lse", "(B, H, Tq), float32 (float64 for float64 inputs); -inf on a row with no allowed key",
                         "lse")),
        ),
    ),
    variants=({"d": 16, "BLOCK_M": 16, "BLOCK_N": 16}, {"d": 32, "BLOCK_M": 32, "BLOCK_N": 16}),
    fit=_fit,
    inputs=_inputs,
    trailing=_trailing,
    negative=negative_qk,
    traced=False,
    options={
        "traffic": {"io": _io, "calls": lambda cfg: ({},),
                    # square: causal blocks above the diagonal to skip; more queries than keys: rows with none
                    "dims": lambda cfg: ({"B": 1, "H": 1, "Tq": 17, "Tk": 17}, {"B": 1, "H": 1, "Tq": 20, "Tk": 9})
                    + ((LONG,) if cfg["d"] == 16 else ()),
                    "words": "the query tiles once, and per query block the key and value tiles up to its last "
                             "allowed key"},
        "parity_float64": {"blocks": lambda cfg: ({"BLOCK_M": 16, "BLOCK_N": 32}, {"BLOCK_M": 32, "BLOCK_N": 16}),
                           "conventions": ("kw", "alias"),  # the launcher passes the given memory to the kernels
                           "long": {"B": 2, "H": 2, "Tq": 37, "Tk": 293}},  # interpreted: kept at 113 x 881 once fitted
        "stability": {"amplify": amplify_qk},
        "value_errors": {"calls": lambda cfg: (({"BLOCK_M": 24}, "BLOCK_M = 24", ()), ({"BLOCK_N": 8}, "BLOCK_N = 8",
                                                                                          ()))},
        "oracle": {"call": _oracle},
        "onchip": {"call": lambda cfg: ({"B": 1, "H": 2, "Tq": 256, "Tk": 256, "dq": 64, "dk": 64, "dv": 64, "d": 64},
                                        {"BLOCK_M": 64, "BLOCK_N": 64}, "float16"),
                   "dtypes": lambda args: (args[0].dtype, torch.float64 if args[0].dtype == torch.float64
                                           else torch.float32)},
    },
    mistakes=MISTAKES,
    banned=LLM_BANNED,
    track="kernels",
    after=("flash_attention",),
    needs=(("triton", "kernels"),),
)
