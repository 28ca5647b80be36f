"""Pieces shared by the attention-module specs."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import LENS_DOC, SCORE_BOUND, Mistake

MODULE_IMPORTS = "import torch\nfrom torch import nn\n\nfrom .masked_softmax import masked_softmax\n"

FORWARD_SIGNATURE = "def forward(self, queries, keys, values, valid_lens=None):"
FORWARD_ARGS = (
    Arg("queries", "(B, Tq, dq)", "query"),
    Arg("keys", "(B, Tk, dk)", "key"),
    Arg("values", "(B, Tk, dv)", "value"),
    Arg("valid_lens", LENS_DOC, "lengths"),
)
OUTPUT_AND_WEIGHTS = (Out("output", "(B, Tq, dv)", "values"), Out("weights", "(B, Tq, Tk)", "weights"))
WEIGHTS_RULES = (
    "weights = masked_softmax(scores, valid_lens), taken before dropout;\n"
    "output = dropout(weights) @ values. In eval() mode dropout does nothing."
)


def qkv_inputs(cfg, gen):
    """Random queries (B, Tq, dq), keys (B, Tk, dk), values (B, Tk, dv) in float64."""
    B, Tq, Tk = cfg["B"], cfg["Tq"], cfg["Tk"]
    shapes = [(B, Tq, cfg["dq"]), (B, Tk, cfg["dk"]), (B, Tk, cfg["dv"])]
    return [torch.randn(*s, generator=gen, dtype=torch.float64) for s in shapes]


def scale_scorer(name):
    """An `amplify` hook for scores = sum over h of w[n, h] * tanh(...): with |tanh| < 1, scaling
    the scorer `name` so that max_n sum_h |w[n, h]| = 1e4 bounds every |score| by 1e4."""

    def amplify(args, state, cfg):
        w = state[name]
        w.mul_(SCORE_BOUND / w.abs().sum(-1).max())

    return amplify


BANNED = ("scaled_dot_product_attention", "_scaled_dot_product*", "multi_head_attention_forward",
          "_native_multi_head_attention")
"""What problems 6 and 7 may not call (torch function names; * matches a prefix): F.scaled_dot_product_attention
and the aten operators behind it, F.multi_head_attention_forward (what nn.MultiheadAttention runs) and its fast path."""
LLM_BANNED = BANNED + ("flex_attention",)
"""The LLM track's: problem 6's, and torch.nn.attention.flex_attention."""

MASK_DOC = "None, or bool broadcastable to the weights; True = the key may be attended"


def lead_fit(cfg, variant):
    """Dims for a problem over any leading dims (variant["rank"] of 2, 3 or 4): "lead" names them (none, B, or B and
    H; rank 2 has B = 1), d = dk = dq, and the variant's own settings."""
    rank = variant["rank"]
    cfg = {**cfg, **variant, "dk": cfg["dq"], "d": cfg["dq"], "lead": ["B", "H"][: rank - 2]}
    return {**cfg, "B": 1} if rank == 2 else cfg


def lead_inputs(cfg, gen, *tails):
    """Standard normal float64 tensors of shape (*lead, cfg[a], cfg[b]) for each (a, b) in `tails`, in order."""
    lead = [cfg[n] for n in cfg["lead"]]
    return [torch.randn(*lead, cfg[a], cfg[b], generator=gen, dtype=torch.float64) for a, b in tails]


QKV = (("Tq", "dq"), ("Tk", "dq"), ("Tk", "dv"))
"""queries (..., Tq, d), keys (..., Tk, d), values (..., Tk, dv), for lead_inputs."""


def amplify_qk(args, state, cfg):
    """An `amplify` hook for queries (..., [Hq,] Tq, d) and keys (..., [Hkv,] Tk, d) scored by q . k / sqrt(d) (key
    head n // G for query head n where the head counts differ): scale both so that the largest |score| is 1e4."""
    q, k = args[0], args[1]
    if k.dim() >= 3 and k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scale_scores(args, SCORE_BOUND / scores.abs().max())


def scale_scores(args, factor):
    """Scale queries and keys (in place) so that every q . k grows by `factor`."""
    args[0].mul_(factor ** 0.5)
    args[1].mul_(factor ** 0.5)


FILL = "filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)"
MASKED = "weights = torch.softmax(filled, dim=-1) * mask"
BOOLEAN_MASK_MISTAKES = (  # problems 6 and 7 share these lines of their references, and so these mistakes
    Mistake("mask_inverted", "mask convention inverted (True treated as 'masked out')",
            ((FILL, "filled = scores.masked_fill(mask, torch.finfo(scores.dtype).min)"),
             (MASKED, "weights = torch.softmax(filled, dim=-1) * ~mask")),
            explain="True means the key MAY be attended (the convention of F.scaled_dot_product_attention); "
                    "nn.MultiheadAttention's masks use the opposite one (the grader inverts the mask to compare with it).",
            hint="Fill where the mask is False: scores.masked_fill(~mask, ...)."),
    Mistake("fill_zero", "masked scores filled with 0 instead of a very negative number",
            ((FILL, "filled = scores.masked_fill(~mask, 0.0)"),),
            explain="A masked score of 0 is not small: where the allowed scores lie below 0 (say -50), the masked keys "
                    "take almost all the weight before the mask zeroes it, and the row no longer sums to 1.",
            hint="Fill with torch.finfo(scores.dtype).min, then multiply the weights by the mask (a -inf fill gives NaN "
                 "gradients on a row with no allowed key)."),
    Mistake("fill_1e4", "masked scores filled with -1e4 (BERT's constant) instead of the dtype's minimum",
            ((FILL, "filled = scores.masked_fill(~mask, -1e4)"),),
            explain="-1e4 is a score the contract allows: where the allowed scores lie near -1e4, a masked key filled "
                    "with -1e4 is no smaller than they are, takes a share of the weight before the mask zeroes it, and "
                    "the row no longer sums to 1.",
            hint="Fill with torch.finfo(scores.dtype).min, which no allowed score reaches, then multiply the weights "
                 "by the mask."),
    Mistake("bias_too_small", "masked keys given an additive bias of -1e4 (BERT's extended mask) instead of a fill",
            ((FILL, "filled = scores + (~mask).to(scores.dtype) * -1e4"),),
            explain="Adding -1e4 only lowers a masked score by 1e4: a masked key whose score is ~1e4 above the allowed "
                    "ones (inputs within the contract) still gets the most weight, and the row comes out wrong even if the "
                    "weights are multiplied by the mask afterwards.",
            hint="Replace masked scores instead of adding to them: scores.masked_fill(~mask, torch.finfo(scores.dtype).min), "
                 "then multiply the weights by the mask."),
    Mistake("uniform_rows", "rows with no allowed key come out uniform, not zero", ((MASKED, "weights = torch.softmax(filled, dim=-1)"),),
            explain="With a finite fill, a row whose keys are all masked has equal scores and softmax makes it uniform; "
                    "the contract wants all zeros there.",
            hint="Multiply by the mask after the softmax: torch.softmax(filled, -1) * mask."),
    Mistake("nan_grad_empty_row", "a -inf additive mask cleaned after the softmax (nan_to_num): NaN gradients on a row "
            "with no allowed key",
            ((FILL, "filled = scores + torch.zeros_like(scores).masked_fill(~mask, float('-inf'))"),
             (MASKED, "weights = torch.nan_to_num(torch.softmax(filled, dim=-1)) * mask")),
            explain="On a row with no allowed key every score is -inf, the softmax is 0/0 = NaN, and nan_to_num cleans only "
                    "the forward: the backward of that softmax is still NaN, and in training the NaN reaches every "
                    "parameter upstream (a padded batch is enough).",
            hint="Fill masked scores with a finite very negative number (torch.finfo(scores.dtype).min) and multiply the "
                 "weights by the mask: no NaN in either pass."),
    Mistake("float32_inside", "a float32 step inside a float64 computation",
            ((FILL, "filled = scores.float().masked_fill(~mask, torch.finfo(torch.float32).min).to(scores.dtype)"),),
            explain="Somewhere the scores pass through float32 (a .float(), a float32 constant or tensor, "
                    "torch.finfo(torch.float32)): the result keeps its float64 dtype but only float32's ~7 digits.",
            hint="Create every tensor and constant in the inputs' dtype (dtype=scores.dtype, torch.finfo(scores.dtype))."),
    Mistake("softmax_no_max", "softmax by hand without subtracting the maximum",
            (("torch.softmax(scores, dim=-1)", "(scores.exp() / scores.exp().sum(-1, keepdim=True))"),
             ("torch.softmax(filled, dim=-1)", "(filled.exp() / filled.exp().sum(-1, keepdim=True))")),
            explain="exp of a score of ~1e4 is inf, and inf / inf is NaN; subtracting the row maximum avoids it.",
            hint="torch.softmax (it subtracts the maximum), or exp(s - s.amax(-1, keepdim=True))."),
)
def aligned(d: int, to: float, dtype=torch.float64):
    """(a, u) with u a unit vector of size d: queries a*u + e*q and keys -a*u + e*k score about `to` (< 0)
    after the 1/sqrt(d) scale, with a spread of about e*a/sqrt(d) around it."""
    return (-to * d**0.5) ** 0.5, torch.full((d,), d**-0.5, dtype=dtype)


SPREAD = 2e-3
"""e above: scores spread by ~0.1 around -50 and by ~2 around -1e4 (within the contract's bound)."""


def negative_qk(args, state, cfg, to):
    """A `negative` hook for queries (..., Tq, d) and keys (..., Tk, d) scored by q . k / sqrt(d)."""
    a, u = aligned(args[0].shape[-1], to)
    args[0].mul_(SPREAD).add_(a * u)
    args[1].mul_(SPREAD).sub_(a * u)


def split_qk(args, state, cfg, masked, lo, hi):
    """A stability `split` for queries (..., Tq, d) and keys (..., Tk, d) scored by q . k / sqrt(d): the keys
    `masked` (B, Tk) score about `hi` = -`lo`, the others about `lo` (judge/checks/stability.py)."""
    if abs(hi + lo) > 1e-9 * abs(lo):
        raise ValueError("split_qk moves scores to lo and -lo only")
    a, u = aligned(args[0].shape[-1], lo)
    args[0].mul_(SPREAD).add_(a * u)
    k = args[1].mul_(SPREAD)
    lead = k.dim() - 2  # an unbatched call: (Tk, d), one row of `masked`
    where = masked[0, :, None] if lead == 0 else masked.reshape(masked.shape[0], *[1] * (lead - 1), masked.shape[1], 1)
    k.add_(torch.where(where, a * u, -a * u))


class ProjectedHeads:
    """The stability and negative-score hooks of multi-head attention over projected queries W_q x + b_q and keys
    W_k m + b_k (parameters "W_q.weight", ..."), split into cfg["H"] heads of cfg[`head`] features."""

    def __init__(self, head: str):
        self.head = head

    def amplify(self, args, state, cfg):
        """Scale the query and key projections so that the largest |score| of any head is exactly 1e4."""
        H, d = cfg["H"], cfg[self.head]
        q = (args[0] @ state["W_q.weight"].T + state["W_q.bias"]).unflatten(-1, (H, d)).transpose(1, 2)
        k = (args[1] @ state["W_k.weight"].T + state["W_k.bias"]).unflatten(-1, (H, d)).transpose(1, 2)
        factor = (SCORE_BOUND / (q @ k.transpose(-2, -1) / d**0.5).abs().max()) ** 0.5
        for name in ("W_q.weight", "W_q.bias", "W_k.weight", "W_k.bias"):
            state[name].mul_(factor)

    def negative(self, args, state, cfg, to):
        """Every head's projected queries a*u + e*(W_q x) and keys -a*u + e*(W_k m): scores about `to`."""
        a, u = aligned(cfg[self.head], to)
        for name, sign in (("W_q", 1.0), ("W_k", -1.0)):
            state[f"{name}.weight"].mul_(SPREAD)
            state[f"{name}.bias"].copy_(sign * a * u.repeat(cfg["H"]))

    def split(self, args, state, cfg, masked, lo, hi):
        """Every key scores about `lo` (as `negative`), then the keys `masked` (B, Tk) are moved, through their inputs
        (args[1], the keys or the memory), to project onto +a*u in every head: they score about `hi` = -`lo`
        (judge/checks/stability.py). W_k is square, or wider than tall (a memory of more features): it reaches any
        key."""
        self.negative(args, state, cfg, lo)
        a, u = aligned(cfg[self.head], lo)
        w, target = state["W_k.weight"], 2 * a * u.repeat(cfg["H"])
        lift = torch.linalg.solve(w, target) if w.shape[0] == w.shape[1] else torch.linalg.pinv(w) @ target
        args[1][masked] += lift


def dropout_mistakes(applied: str, misplaced: str) -> tuple:
    """The dropout mistakes of a module whose reference line `applied` drops the weights; `misplaced` is that
    line with dropout acting after the weights multiply the values. Named by check_dropout's evidence."""
    return (
        Mistake("dropout_wrong_p", "dropout with a fixed p, not the module's `dropout` argument",
                (("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(0.1)"),),
                explain="The kept weights are scaled by 1/(1-p) for a p other than the one the module was given: "
                        "p is hard-coded (or taken from the wrong argument).",
                hint="self.dropout = nn.Dropout(dropout), with the constructor's own argument."),
        Mistake("dropout_misplaced", "dropout applied to the output (or the values), not to the weights",
                ((applied, misplaced),),
                explain="Attention dropout zeroes attention weights: each query drops some of the keys it attends. "
                        "Dropping the output (or the values) instead removes features, not keys.",
                hint="output = dropout(weights) @ values: drop the weights after the softmax."),
    )


def concat_no_transpose(returned: str, reshaped: str) -> Mistake:
    """A multi-head module's return line `returned`, with the contexts reshaped without the transpose."""
    return Mistake("concat_no_transpose", "head contexts concatenated without moving the head axis next to the features",
                   ((returned, reshaped),),
                   explain="The contexts are (B, H, Tq, d): reshaping them straight to (B, Tq, H*d) mixes queries of "
                           "different heads into one row. The head axis must move next to the features first.",
                   hint="context.transpose(1, 2).reshape(B, Tq, H * d): (B, Tq, H, d), then flatten the last two.")


def not_dividing(Hq: int) -> list:
    """Key/value head counts that do not divide Hq: one more than Hq, and one below it (Hq = 6 with Hkv = 4: more
    query heads than key heads, still no whole groups), with the words that name them."""
    below = next((h for h in range(Hq - 1, 1, -1) if Hq % h), None)
    return [(Hq + 1, "Hq not divisible by Hkv")] + ([(below, f"Hq = {Hq} not divisible by Hkv = {below} < Hq")]
                                                    if below else [])
