"""Spec: attention with linear biases (ALiBi: Press et al. 2022; BLOOM, MPT), section 18 of the serving stage."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import (
    BOOLEAN_MASK_MISTAKES, LLM_BANNED, MASK_DOC, amplify_qk, lead_fit, lead_inputs, negative_qk, split_qk, QKV,
)

SLOPES = "slopes = geometric(c) + geometric(2 * c)[0::2][:num_heads - c]"
GEOMETRIC = "return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]"
CHECKED = "if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:"
BIAS = "scores = scores - slopes[:, None, None] * distance"
SCALED = "scores = queries @ keys.transpose(-2, -1) / d**0.5"
DISTANCE = "distance = (pos - j).abs().to(queries.dtype)"
COMBINED = "allowed = allowed & mask"
SOFTMAX = "weights = torch.softmax(filled, dim=-1) * mask"

MISTAKES = tuple(m for m in BOOLEAN_MASK_MISTAKES if m.id != "softmax_no_max") + (
    Mistake("slopes_any_n", "every head count treated as a power of two: 2 ** (-8 (i + 1) / n) for any n",
            ((SLOPES, "slopes = geometric(num_heads)"),),
            explain="The paper's geometric sequence 2^(-8/n), 2^(-16/n), ... is defined for n a power of two. For other "
                    "n its code takes the c slopes of c, the largest power of two below n, and then every other slope "
                    "of 2c (the ones that fall between), the first n - c of them: n = 6 gives 1/4, 1/16, 1/64, 1/256, "
                    "1/2, 1/8.",
            hint="c = 2 ** floor(log2(n)); slopes = geometric(c) + geometric(2c)[0::2][:n - c]."),
    Mistake("slopes_next_power_prefix", "for n no power of two, the first n slopes of the next power of two",
            ((SLOPES, "slopes = geometric(c) if c == num_heads else geometric(2 * c)[:num_heads]"),),
            explain="Taking 2c's sequence and cutting it to n heads gives the gentlest slopes to no one: n = 6 gets "
                    "1/2, 1/4, ..., 1/64 where the paper gives 1/4, 1/16, 1/64, 1/256 and then 1/2, 1/8. The paper keeps "
                    "c's slopes whole and fills in with every other slope of 2c.",
            hint="c = 2 ** floor(log2(n)); slopes = geometric(c) + geometric(2c)[0::2][:n - c]."),
    Mistake("slopes_odd_indices", "the extra slopes taken at the odd indices of 2c's sequence",
            ((SLOPES, "slopes = geometric(c) + geometric(2 * c)[1::2][:num_heads - c]"),),
            explain="The odd entries of 2c's sequence are exactly c's own slopes (2^(-8*2k/2c) = 2^(-8k/c)): taking them "
                    "gives heads the same slope twice. The new slopes are the even entries, the ones between c's.",
            hint="geometric(2 * c)[0::2][:n - c]."),
    Mistake("slopes_from_one", "the slopes start at 1 (2 ** (-8 i / n), i from 0) instead of 2 ** (-8 / n)",
            ((GEOMETRIC, "return [2.0 ** (-8.0 * i / n) for i in range(n)]"),),
            explain="Head 0's slope is 2^(-8/n), not 1: with n = 8 the slopes are 1/2, 1/4, ..., 1/256. Starting at "
                    "i = 0 shifts every head to the next one's slope and gives head 0 a slope of 1.",
            hint="slope[i] = 2 ** (-8 * (i + 1) / n) for i = 0..n-1."),
    Mistake("slopes_reversed", "the slopes in reverse order (head 0 the smallest)",
            (("return torch.tensor(slopes, dtype=torch.float64)", "return torch.tensor(slopes[::-1], dtype=torch.float64)"),),
            explain="Head 0 has the largest slope (the most local head): the sequence decreases with the head index.",
            hint="slope[i] = 2 ** (-8 * (i + 1) / n): head 0 first."),
    Mistake("num_heads_not_checked", "num_heads below 1 (or a bool) accepted by alibi_slopes",
            ((CHECKED, "if num_heads == 0:"),),
            explain="There are no slopes for 0 or -3 heads, and True is not a number of heads: the contract raises "
                    "ValueError for each (an integer argument that is a bool counts as invalid).",
            hint="if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1: raise ValueError."),
    Mistake("bias_sign", "the bias added with the wrong sign (distant keys favoured)",
            ((BIAS, "scores = scores + slopes[:, None, None] * distance"),),
            explain="ALiBi penalises distance: bias = -slope * |pos(i) - j|, so that a query looks mostly nearby. With "
                    "+ the far keys gain weight.",
            hint="scores = q k^T / sqrt(d) - slopes[n] * |pos(i) - j|."),
    Mistake("bias_before_scaling", "the bias added before the 1/sqrt(d) scaling (and so scaled with the scores)",
            ((SCALED, "scores = queries @ keys.transpose(-2, -1)"),
             (BIAS, "scores = (scores - slopes[:, None, None] * distance) / d**0.5")),
            explain="The paper adds the bias to the scaled scores, q k^T / sqrt(d) + bias. Adding it first divides the "
                    "slopes by sqrt(d) too: every head looks sqrt(d) times further than it should.",
            hint="Scale first, then add: scores = q k^T / sqrt(d) - slopes[n] * |pos(i) - j|."),
    Mistake("top_left", "positions aligned to the top left (pos(i) = i) instead of the bottom right",
            (("pos = torch.arange(Tq, device=queries.device)[:, None] + (Tk - Tq)",
              "pos = torch.arange(Tq, device=queries.device)[:, None]"),),
            explain="With Tq != Tk the queries are the last Tq positions (decoding after a prefill): pos(i) = i + Tk - Tq. "
                    "From the top left both the causal rule and the distances are off by Tk - Tq.",
            hint="pos(i) = i + (Tk - Tq); distance = |pos(i) - j|."),
    Mistake("distance_from_row", "the distance |i - j| from the query's row, under a bottom-right causal rule",
            ((DISTANCE, "distance = (torch.arange(Tq, device=queries.device)[:, None] - j).abs().to(queries.dtype)"),),
            explain="The causal rule and the bias must agree on where query i sits: pos(i) = i + Tk - Tq. With the mask "
                    "at pos(i) and the bias at i, a decoding query (Tq < Tk) is penalised as if it were Tk - Tq tokens "
                    "earlier: every key's bias is off, the nearest ones most.",
            hint="distance = |pos(i) - j| with pos(i) = i + (Tk - Tq), the same pos as the causal rule."),
    Mistake("signed_distance", "the signed distance pos(i) - j in the bias, also without the causal rule",
            ((DISTANCE, "distance = (pos - j).to(queries.dtype)"),),
            explain="Under the causal rule only keys j <= pos(i) remain, where pos(i) - j >= 0 and the sign does not "
                    "matter. With is_causal=False the later keys have pos(i) - j < 0: -slope * (pos(i) - j) turns "
                    "into a reward that grows with the distance. The symmetric bias uses |pos(i) - j|.",
            hint="distance = |pos(i) - j|: the same under the causal rule, symmetric without it."),
    Mistake("causal_dropped_with_mask", "the causal rule dropped when a mask is given (the mask replaces it)",
            ((COMBINED, "allowed = mask"),),
            explain="is_causal and mask both restrict the keys: a key is allowed when the causal rule allows it and "
                    "the mask does. A padding mask alone lets every query see the future.",
            hint="allowed = causal & mask."),
    Mistake("mask_ignored", "the mask argument ignored",
            ((COMBINED, "allowed = allowed | False"),),
            explain="mask (True = attend) removes keys: padding, or any pattern the caller needs. Ignoring it attends "
                    "keys the caller excluded.",
            hint="allowed = causal & mask (where each is given)."),
    Mistake("slopes_arg_ignored", "the given slopes ignored (alibi_slopes(H) always)",
            (("if slopes is None:\n        slopes = alibi_slopes(H)", "slopes = alibi_slopes(H)"),),
            explain="slopes=None means the paper's slopes; given slopes (a model's own, or trained ones) must be used "
                    "as they are.",
            hint="if slopes is None: slopes = alibi_slopes(H)."),
    Mistake("queries_scaled_in_place", "the queries scaled in place (queries.mul_(d ** -0.5))",
            ((SCALED, "scores = queries.mul_(d**-0.5) @ keys.transpose(-2, -1)"),),
            explain="queries is the caller's tensor: mul_ changes it (a second call, or the caller's next use, sees "
                    "scaled queries), and autograd refuses an in-place change of a leaf that needs its gradient.",
            hint="scores = queries @ keys.transpose(-2, -1) / d ** 0.5 makes a new tensor."),
    Mistake("heads_moved_last", "the output returned as (B, Tq, H, dv), heads moved next to the features",
            (("return weights @ values, weights", "return (weights @ values).transpose(1, 2), weights"),),
            explain="The contract's output keeps the heads where the inputs have them, (B, H, Tq, dv). The transpose "
                    "belongs to a multi-head module that concatenates the heads afterwards, which is not this function.",
            hint="return weights @ values, weights: (B, H, Tq, dv) and (B, H, Tq, Tk)."),
    Mistake("softmax_no_max", "softmax by hand without subtracting the maximum",
            ((SOFTMAX, "weights = (filled.exp() / filled.exp().sum(-1, keepdim=True)) * mask"),),
            explain="exp of a score of ~1e4 is inf, and inf / inf is NaN; subtracting the row maximum avoids it.",
            hint="torch.softmax (it subtracts the maximum), or exp(s - s.amax(-1, keepdim=True))."),
)


def _fit(cfg, variant):
    """Heads (B, H, Tq, d) always; a variant's own H (a count that is no power of two) where the drawn H exceeds 1."""
    cfg = lead_fit(cfg, {**variant, "rank": 4})
    return {**cfg, "H": variant["H"]} if "H" in variant and cfg["H"] > 1 else cfg


def _inputs(cfg, gen):
    """queries (B, H, Tq, d), keys (B, H, Tk, d), values (B, H, Tk, dv), standard normal; is_causal; slopes None or
    U(-0.25, 1) per head (one of them negative where H > 1)."""
    q, k, v = lead_inputs(cfg, gen, *QKV)
    slopes = None
    if cfg["slopes"] == "given":
        slopes = torch.rand(cfg["H"], generator=gen, dtype=torch.float64) * 0.75 + 0.25
        slopes[-1] = -slopes[-1] / 2 if cfg["H"] > 1 else slopes[-1]
    return [q, k, v, cfg["is_causal"], slopes]


def paper_slopes(n: int) -> list[float]:
    """The paper's own code (Press et al., get_slopes), written independently of the reference: a ratio sequence."""
    import math

    def power_of_2(m):
        start = 2 ** (-2 ** -(math.log2(m) - 3))
        return [start * start**i for i in range(m)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    c = 2 ** math.floor(math.log2(n))
    return power_of_2(c) + paper_slopes(2 * c)[0::2][: n - c]


def _oracle(call):
    """F.scaled_dot_product_attention with a float bias: the paper's slopes (its own code) times -|pos(i) - j|, -inf
    where no key is allowed (rows with none set to 0); its weights through identity values"""
    q, k, v, is_causal, slopes, *rest = call["args"] + [None] * (6 - len(call["args"]))
    mask = rest[0]
    Tq, Tk, H = q.shape[-2], k.shape[-2], q.shape[-3]
    if slopes is None:
        slopes = torch.tensor(paper_slopes(H), dtype=q.dtype)
    pos = torch.arange(Tq)[:, None] + Tk - Tq
    j = torch.arange(Tk)[None, :]
    allowed = (j <= pos) if is_causal else torch.ones(Tq, Tk, dtype=torch.bool)
    allowed = (allowed if mask is None else allowed & mask).expand(*q.shape[:-1], Tk)
    bias = (-slopes.to(q.dtype)[:, None, None] * (pos - j).abs().to(q.dtype)).masked_fill(~allowed, float("-inf"))
    keep = allowed.any(-1, keepdim=True)
    bias = bias.masked_fill(~keep, 0.0)  # a row with no allowed key: computed on anything, then set to 0
    F = torch.nn.functional
    eye = torch.eye(Tk, dtype=q.dtype).expand(*k.shape[:-1], Tk)
    return [torch.where(keep, F.scaled_dot_product_attention(q, k, v, attn_mask=bias), 0.0),
            torch.where(keep, F.scaled_dot_product_attention(q, k, eye, attn_mask=bias), 0.0)]


SLOPE_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 20, 24, 31, 32, 33, 64, 80, 100)
"""Powers of two, every count up to 17 (odd ones past 8 included), and others on each side of a power of two."""


def _companions(cfg, gen):
    """alibi_slopes for every count in SLOPE_COUNTS (float32 or float64 back), and for invalid counts (ValueError);
    alibi_attention with its defaults (causal, the paper's slopes) on the drawn dims and on self-attention (Tq = Tk =
    7); not causal with no mask on both; given slopes of the other float dtype than the inputs' (used in the inputs');
    the paper's slopes for 12 heads, compared at float32's tolerance (alibi_slopes may return float32)."""
    calls = [{"symbol": "alibi_slopes", "args": [n], "dtypes": ("float32", "float64")} for n in SLOPE_COUNTS]
    calls += [{"symbol": "alibi_slopes", "args": [n], "raises": why}
              for n, why in ((0, "0 heads"), (-3, "a negative count"), (True, "a bool"), (2.0, "a float"))]
    square = {**cfg, "Tq": 7, "Tk": 7}
    for dims in (cfg, square):
        calls += [{"symbol": None, "args": lead_inputs(dims, gen, *QKV)},
                  {"symbol": None, "args": lead_inputs(dims, gen, *QKV) + [False]}]
    slopes = torch.rand(cfg["H"], generator=gen, dtype=torch.float64) + 0.1
    q, k, v = (t.float() for t in lead_inputs(cfg, gen, *QKV))
    calls += [{"symbol": None, "args": [q, k, v, True, slopes], "dtype": "float32"},
              {"symbol": None, "args": lead_inputs(cfg, gen, *QKV) + [False, slopes.float()]}]
    return calls + [{"symbol": None, "args": lead_inputs({**square, "H": 12, "B": 1}, gen, *QKV), "tolerance": "float32"}]


PROBLEM = Problem(
    id="alibi_attention",
    title="ALiBi",
    summary="Attention with linear biases: no position embedding, each head penalises distance with its own slope.",
    symbol="alibi_attention",
    points={"shapes": 1, "weight_sums": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 2, "companion": 2,
            "gradients": 1, "masking": 1, "stability": 1, "side_effects": 1, "capabilities": 1, "cuda": 1,
            "cuda_half": 1},
    hints=(
        "alibi_slopes(n): for n a power of two, slope[i] = 2 ** (-8 (i + 1) / n). Otherwise take c, the largest power "
        "of two <= n: c's slopes, then 2c's slopes at indices 0, 2, 4, ..., the first n - c of them.",
        "Query i sits at pos(i) = i + Tk - Tq. scores = q k^T / sqrt(d) - slopes[n] * |pos(i) - j|, the bias added "
        "after the scaling; key j is allowed when j <= pos(i) (is_causal) and the mask allows it.",
        "distance = (pos[:, None] - j[None, :]).abs(); scores = q @ k^T / sqrt(d) - slopes[:, None, None] * distance; "
        "fill the disallowed with torch.finfo(dtype).min, softmax, multiply by the allowed mask, @ values.",
    ),
    methods=(
        Method(
            signature="def alibi_slopes(num_heads):",
            statement=(
                "The (num_heads,) slopes of Press et al. (2022), head 0 first, float32 or float64 on the CPU. For n a\n"
                "power of two: slope[i] = 2 ** (-8 (i + 1) / n). Otherwise, with c the largest power of two <= n:\n"
                "the c slopes of c, then the slopes of 2c at indices 0, 2, 4, ..., the first n - c of them (the\n"
                "paper's get_slopes(2c)[0::2][:n - c]). n = 8: 1/2, 1/4, ..., 1/256. num_heads < 1, or not an int\n"
                "(a bool included), raises ValueError."
            ),
            args=(Arg("num_heads", "int >= 1", "scalar"),),
            returns=(Out("slopes", "(num_heads,)", "values"),),
        ),
        Method(
            signature="def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):",
            statement=(
                "Query i sits at pos(i) = i + Tk - Tq (bottom right, in both modes). scores[b, n, i, j] = q . k /\n"
                "sqrt(d) - slopes[n] * |pos(i) - j|, the bias added after the scaling (a bias that differs by a\n"
                "constant per row, as BLOOM's slopes[n] * j, gives the same result). Key j is allowed when\n"
                "j <= pos(i) (if is_causal) and the mask allows it. weights = softmax over the allowed keys, 0\n"
                "elsewhere, all zeros on a row with no allowed key; output = weights @ values. slopes None means\n"
                "alibi_slopes(H); given slopes are used in the inputs' dtype and device. No other position encoding.\n"
                "Do not call F.scaled_dot_product_attention."
            ),
            args=(Arg("queries", "(B, H, Tq, d)", "query"), Arg("keys", "(B, H, Tk, d)", "key"),
                  Arg("values", "(B, H, Tk, dv)", "value"),
                  Arg("is_causal", "bool: key j only for j <= pos(i)", "flag"),
                  Arg("slopes", "None (the paper's) or a float tensor (H,)", "scalar"),
                  Arg("mask", MASK_DOC + ", up to (B, H, Tq, Tk)", "flagged_mask")),
            returns=(Out("output", "(B, H, Tq, dv)", "values"), Out("weights", "(B, H, Tq, Tk)", "weights")),
        ),
    ),
    variants=({"is_causal": True, "slopes": "paper", "H": 6}, {"is_causal": False, "slopes": "paper"},
              {"is_causal": True, "slopes": "given", "H": 8}),  # given slopes where the paper's would be powers of 2
    fit=_fit,
    inputs=_inputs,
    negative=negative_qk,
    mistakes=MISTAKES,
    banned=LLM_BANNED,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": amplify_qk, "split": split_qk, "long": True},
        "parity_float64": {"far": True},  # positions past 8192: a table of max_position_embeddings fails
        "oracle": {"call": _oracle},
        "companion": {"calls": _companions},
        "masking": {"permuted": False},  # the bias depends on each key's position: their order matters
    },
    track="serving",
    after=("scaled_dot_product_attention",),
)
