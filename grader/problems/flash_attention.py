"""Spec: the FlashAttention forward pass: tiles, an online softmax, (output, lse), causal aligned bottom right."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import LLM_BANNED, QKV, amplify_qk, lead_fit, lead_inputs, negative_qk

ACC = "acc = acc * alpha[..., None] + p @ v"
SUM = "l = l * alpha + p.sum(-1)"
ALLOWED = "allowed = k_pos[None, :] <= q_pos[:, None] + shift"
K_END = "k_end = min(Tk, q0 + bq + shift) if is_causal else Tk"
K_LOOP = "for k0 in range(0, max(k_end, 0), block_k):"
LSE = 'lses.append(torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l)))'
RETURN = "return torch.cat(outs, dim=-2).to(queries.dtype), torch.cat(lses, dim=-1).to(queries.dtype)"
OUT = "outs.append(acc / torch.where(empty, torch.ones_like(l), l)[..., None])"

MISTAKES = (
    Mistake("no_rescale_acc", "the accumulator not rescaled when the running max changes",
            ((ACC, "acc = acc + p @ v"),),
            explain="Each key block's p = exp(s - m_new) is relative to the new running max; what acc already holds "
                    "was summed relative to the old one and must be multiplied by exp(m_old - m_new) first.",
            hint="alpha = exp(m_old - m_new); acc = acc * alpha[..., None] + p @ v (and the same for the sum)."),
    Mistake("no_rescale_sum", "the running sum not rescaled when the running max changes",
            ((SUM, "l = l + p.sum(-1)"),),
            explain="The running sum of exponentials is relative to the running max, like the accumulator: when the "
                    "max grows, the old sum must shrink by exp(m_old - m_new).",
            hint="l = l * alpha + p.sum(-1), alpha = exp(m_old - m_new)."),
    Mistake("lse_without_max", "lse = log(sum) without adding the running max back",
            ((LSE, LSE.replace("m + torch.log(l)", "torch.log(l)")),),
            explain="The running sum is of exp(s - m): its log is logsumexp(s) - m, so lse = m + log(l).",
            hint="lse = m + torch.log(l)."),
    Mistake("causal_top_left", "causal mask aligned to the top left (j <= i) instead of the bottom right",
            ((ALLOWED, "allowed = k_pos[None, :] <= q_pos[:, None]"), (K_END, "k_end = min(Tk, q0 + bq) if is_causal else Tk")),
            explain="With Tq != Tk the queries are the last Tq positions of the Tk keys (decoding with a cache, "
                    "FlashAttention 2): query i sees key j when j <= i + (Tk - Tq). F.scaled_dot_product_attention's "
                    "is_causal aligns top left instead; they agree only when Tq == Tk.",
            hint="allowed = k_pos <= q_pos + (Tk - Tq)."),
    Mistake("last_block_dropped", "the last, partial key block dropped",
            ((K_LOOP, "for k0 in range(0, max(k_end, 0) - block_k + 1, block_k):"),),
            explain="When block_k does not divide Tk the last block is shorter; a loop over whole blocks only never "
                    "reaches the last keys.",
            hint="for k0 in range(0, Tk, block_k): keys[..., k0:k0 + block_k, :] (slicing stops at Tk by itself)."),
    Mistake('causal_in_block', 'causal mask built from the in-block indices (a lower-triangular tile) instead of the positions',
            (('allowed = k_pos[None, :] <= q_pos[:, None] + shift', 'allowed = (k_pos - k0)[None, :] <= (q_pos - q0)[:, None]'),),
            explain="Inside a tile, key j may be attended from query i when j <= i + (Tk - Tq) in absolute positions: k0 + j' <= q0 + i' + shift. A mask made from the tile's own indices (tril of the tile) masks keys that earlier query rows may see, and ignores the bottom-right shift.",
            hint='k_pos = k0 + arange(bk), q_pos = q0 + arange(bq); allowed = k_pos[None, :] <= q_pos[:, None] + (Tk - Tq).'),
    Mistake('lse_log2', "lse returned in base 2 (the kernels' exp2 units), not the natural log",
            (('m + torch.log(l)', '(m + torch.log(l)) * 1.4426950408889634'),),
            explain='Kernels often work in base 2 (exp2 is faster; scores are premultiplied by log2(e)), so their running max and log-sum are in log2 units: lse must be converted back (times ln 2) before it is returned.',
            hint='lse = m + log(l) in natural-log units; if you keep m2 = m * log2(e) and log2(l), return (m2 + log2(l)) * ln 2.'),
    Mistake("full_scores", "the full (Tq, Tk) score matrix built (one block for everything)",
            (("    Tk, dv = keys.shape[-2], values.shape[-1]\n",
              "    Tk, dv = keys.shape[-2], values.shape[-1]\n    block_q, block_k = max(Tq, 1), max(Tk, 1)\n"),),
            explain="The point of tiling is never to hold more than one block of scores: the values are right, but the "
                    "memory is what FlashAttention exists to save.",
            hint="Loop over query blocks of block_q rows and key blocks of block_k keys; keep only running statistics."),
    Mistake("max_init_zero", "running max started at 0 instead of -inf",
            (('m = torch.full(q.shape[:-1], float("-inf"), dtype=work, device=queries.device)',
              "m = torch.zeros(q.shape[:-1], dtype=work, device=queries.device)"),),
            explain="With every score far below 0 (say -1e4) a max that starts at 0 makes every exp(s - m) underflow to "
                    "0: the sum is 0 and the row comes out NaN.",
            hint="m starts at -inf; guard exp(s - m) for rows whose max is still -inf."),
    Mistake("no_scaling", "scores not scaled by 1/sqrt(d)", (("s = (q @ k.transpose(-2, -1)) * scale", "s = q @ k.transpose(-2, -1)"),),
            explain="Scores are q . k / sqrt(d), in the output and in the lse alike.",
            hint="s = q @ k^T * d**-0.5."),
    Mistake("lse_plus_inf", "lse +inf on a row with no allowed key",
            ((LSE, LSE.replace('float("-inf")', 'float("inf")')),),
            explain="The logsumexp of no terms is -inf. FlashAttention 2's kernels store +inf there as an internal "
                    "convention; the contract wants -inf.",
            hint="lse = -inf where the running sum is 0."),
    Mistake("empty_rows_nan", "rows with no allowed key come out NaN (0 / 0)",
            ((OUT, "outs.append(acc / l[..., None])"),),
            explain="A query with no allowed key (causal with Tq > Tk) has a running sum of 0: dividing gives NaN; its "
                    "output must be 0.",
            hint="Divide by l where l > 0 and leave the row at 0 elsewhere."),
    Mistake("lse_keepdim", "lse returned with a trailing axis of 1: (..., Tq, 1)",
            ((RETURN, RETURN.replace("torch.cat(lses, dim=-1)", "torch.cat(lses, dim=-1)[..., None]")),),
            explain="lse has one number per query row, (..., Tq), like the output without its feature axis; kept as "
                    "(..., Tq, 1) (keepdim=True) it no longer matches what a backward pass indexes.",
            hint="torch.logsumexp(..., dim=-1) without keepdim; m + log(l) with m and l of shape (..., bq)."),
    Mistake("lse_float32", "lse returned as float32 whatever the inputs' dtype (as FlashAttention's kernels do)",
            ((RETURN, RETURN.replace("torch.cat(lses, dim=-1).to(queries.dtype)", "torch.cat(lses, dim=-1).float()")),),
            explain="The kernels keep their statistics in float32 and return lse so; the contract returns both outputs "
                    "in the inputs' dtype (float64 inputs keep float64 precision).",
            hint="Return lse.to(queries.dtype)."),
    Mistake("blocks_not_checked", "block sizes below 1 accepted",
            (("    if block_q < 1 or block_k < 1:\n", "    if False:\n"),),
            explain="A block of 0 or fewer rows or keys covers nothing; the contract raises ValueError.",
            hint="if block_q < 1 or block_k < 1: raise ValueError(...)."),
)


def _trailing(cfg):
    return [] if (cfg["block_q"], cfg["block_k"]) == (64, 64) else [cfg["block_q"], cfg["block_k"]]


def _oracle(call):
    """F.scaled_dot_product_attention with the bottom-right causal mask, and torch.logsumexp of the scaled scores"""
    q, k, v, causal = (list(call["args"]) + [False])[:4]  # is_causal may be left to its default
    Tq, Tk = q.shape[-2], k.shape[-2]
    mask = torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq) if causal else None
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return [torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask), torch.logsumexp(scores, -1)]


BLOCKS = ((2, 3), (3, 2), (1, 1), (4, 64))
"""Block sizes of extra calls: config 0's prime Tq and Tk (5 or more) leave a partial last block on both axes."""


def _memory_fit(cfg):
    """Dims where the (Tq, Tk) scores, or a (Tq, Tk) mask, or keys padded to a multiple of the block, exceed the bound."""
    return {**cfg, "B": 2, "H": 1, "Tq": 61, "Tk": 67, "dq": 8, "dk": 8, "dv": 8}


MEMORY_BLOCK = 16
"""Blocks of the memory calls: partial on both axes of Tq = 61, Tk = 67, and few enough (4 x 5) that the measured
forward stays quick; a block's scores (L*16*16) stay far below S, the full scores (L*61*67) far above."""


BACKSTOP = {
    "dims": {"B": 1, "H": 1, "Tq": 4096, "Tk": 8192, "dq": 8, "dk": 8, "d": 8, "dv": 8},
    "args": {"block_q": 128, "block_k": 128, "is_causal": False},
    "allowed": lambda cfg, args: 128 * 128 + cfg["Tk"] * cfg["dq"],
    "resident_kb": 64 * 1024,
    "held_kb": 96 * 1024,
    "rows": 64,
}
"""A float32 call whose full (Tq, Tk) scores take 128 MB, measured from outside the worker (run/cgroup.py); blocks of
128 need 64 kB each, below the worker's fixed mmap threshold (run/intercept.py), so they reuse the heap instead of
faulting in fresh pages (blocks of 256: 133,000 page faults, 0.31 s; of 128: none, 0.14 s for the 32 x 64 block
pairs). Growing by half the full scores, or holding three quarters of them when the call begins, means they were
built, however the dispatch mode was avoided."""


def _memory(cfg, args):
    """Blocks of 16 by 16, causal and not: max(S, L*block_q*max(block_k, d, dv)) elements, S the largest input or output."""
    L = args[0].numel() // (cfg["Tq"] * cfg["dq"])
    S = max(max(a.numel() for a in args[:3]), L * cfg["Tq"] * cfg["dv"])
    b = MEMORY_BLOCK
    allowed = max(S, L * b * max(b, cfg["dq"], cfg["dv"]))
    return [({"is_causal": causal, "block_q": b, "block_k": b}, allowed) for causal in (False, True)]


PROBLEM = Problem(
    id="flash_attention",
    title="FlashAttention forward",
    summary="Attention in tiles with an online softmax, returning (output, lse); causal aligned to the bottom right.",
    symbol="flash_attention",
    points={"shapes": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 2, "block_invariance": 2, "gradients": 1,
            "stability": 1, "side_effects": 1, "memory": 2, "value_errors": 1,
            "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "Loop over query blocks of block_q rows and, for each, over key blocks of block_k keys. Keep per row a "
        "running max m, a running sum l of exponentials and an accumulator acc.",
        "When a key block arrives: m_new = max(m, block max), alpha = exp(m - m_new), l = l * alpha + sum(exp(s - "
        "m_new)), acc = acc * alpha + exp(s - m_new) @ v. At the end output = acc / l, lse = m + log(l). Build the "
        "causal mask from the block's positions: j <= i + (Tk - Tq).",
        "m starts at -inf; m_safe = where(isfinite(m_new), m_new, 0) avoids -inf - (-inf); rows with no allowed key "
        "(l == 0) give output 0 and lse -inf; the last block may be partial: slice, never pad.",
    ),
    methods=(
        Method(
            signature="def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):",
            statement=(
                "output = softmax(q k^T / sqrt(d)) v over the allowed keys; lse = logsumexp of each row's scaled\n"
                "scores over its allowed keys. is_causal: key j is allowed for query i when j <= i + (Tk - Tq)\n"
                "(aligned to the bottom right). A row with no allowed key has output 0 and lse -inf.\n"
                "Computed in blocks of block_q queries and block_k keys with an online softmax: during the call no\n"
                "tensor an operation allocates has more than max(S, L*block_q*max(block_k, d, dv)) elements (S the\n"
                "largest input or output). block_q < 1 or block_k < 1 raises ValueError. Results do not depend on\n"
                "the block sizes beyond rounding. Do not call F.scaled_dot_product_attention."
            ),
            args=(Arg("queries", "(..., Tq, d)", "query"), Arg("keys", "(..., Tk, d)", "key"),
                  Arg("values", "(..., Tk, dv)", "value"),
                  Arg("is_causal", "bool: key j allowed for query i when j <= i + (Tk - Tq)", "causal"),
                  Arg("block_q", "queries per block (>= 1)", "scalar"), Arg("block_k", "keys per block (>= 1)", "scalar")),
            returns=(Out("output", "(..., Tq, dv)", "values"), Out("lse", "(..., Tq), -inf on a row with no allowed key", "lse")),
        ),
    ),
    variants=({"rank": 3, "block_q": 64, "block_k": 64}, {"rank": 4, "block_q": 2, "block_k": 3},
              {"rank": 2, "block_q": 3, "block_k": 2}),
    fit=lead_fit,
    inputs=lambda cfg, gen: lead_inputs(cfg, gen, *QKV),
    trailing=_trailing,
    negative=negative_qk,
    traced=False,  # the learner tiles its own way: its block-level tensors are no stages of the reference's tiling
    options={  # each check's options (the check units in judge/checks/ declare them)
        "memory": {
            "calls": _memory,
            "fit": _memory_fit,
            "backstop": BACKSTOP,
            "words": {"bound": "max(S, L*block_q*max(block_k, d, dv))", "tensor": "the full (Tq, Tk) score matrix or mask",
                      "advice": "Keep one block of scores at a time; build each block's causal mask from its positions and "
                                "slice partial last blocks (padding an input copies it)"},
        },
        "parity_float64": {"blocks": lambda cfg: tuple({"block_q": bq, "block_k": bk} for bq, bk in BLOCKS)},
        "stability": {"amplify": amplify_qk, "long": True},
        "value_errors": {"calls": lambda cfg: (({"block_q": 0}, "block_q = 0", ()), ({"block_k": -2}, "block_k = -2", ()))},
        "oracle": {"call": _oracle},
    },
    mistakes=MISTAKES,
    banned=LLM_BANNED,
    track="LLM",
    after=("scaled_dot_product_attention",),
)
