"""Spec: masked softmax."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import LENS_DOC, SCORE_BOUND, Method, Mistake, Problem


def _inputs(cfg, gen):
    return [2.0 * torch.randn(cfg["B"], cfg["Tq"], cfg["Tk"], generator=gen, dtype=torch.float64)]


def _amplify(args, state, cfg):
    args[0].mul_(SCORE_BOUND / args[0].abs().max())  # the largest |score| is exactly 1e4


def _negative(args, state, cfg, to):
    """Every score in [to - 0.5, to + 0.5]: the valid ones far below the masked ones' fill of 0 (say)."""
    args[0].div_(2 * args[0].abs().max()).add_(to)


FILL = "torch.finfo(scores.dtype).min"
LAST = "return torch.softmax(filled, dim=-1) * keep"
MISTAKES = (
    Mistake("wrong_axis", "softmax over the wrong axis",
            (("softmax(scores, dim=-1)", "softmax(scores, dim=1)"), ("softmax(filled, dim=-1)", "softmax(filled, dim=1)")),
            explain="The softmax runs over queries (or batch) instead of over the keys, so rows do not sum to 1 over Tk and each key's weight depends on the other queries.",
            hint='Normalise over the last axis: torch.softmax(x, dim=-1).'),
    Mistake("fill_zero", "masked scores filled with 0 instead of a very negative number", ((FILL, "0.0"),),
            explain='Masked scores set to 0 still get weight exp(0) = 1 relative to the others: masked keys leak in and valid weights shrink.',
            hint='Fill masked scores with a very negative number (torch.finfo(scores.dtype).min) or -inf, not 0.'),
    Mistake("mask_after_softmax", "mask applied after the softmax without renormalising",
            ((LAST, "return torch.softmax(scores, dim=-1) * keep"),),
            explain='The softmax ran over every key and the mask only zeroed the masked weights afterwards, so the valid weights no longer sum to 1.',
            hint='Mask before the softmax (fill masked scores with a very negative number), or renormalise after zeroing.'),
    Mistake("off_by_one", "lengths off by one (j <= valid_len)", (("< lens[..., None]", "<= lens[..., None]"),),
            explain='Key j is valid when j < valid_len; using <= (or valid_len - 1) lets one masked key in, or drops one valid key.',
            hint='Build the mask as torch.arange(Tk) < lens[..., None].'),
    Mistake("lens_2d_ignored", "2-D valid_lens (B, Tq) not handled",
            (("lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]", "lens = valid_lens[:, None]"),),
            explain='valid_lens of shape (B, Tq) gives one length per query; treating it like (B,) broadcasts it over the wrong axis or fails.',
            hint='For 2-D valid_lens use lens[..., None] directly; only a 1-D (B,) length needs an extra Tq axis: lens[:, None, None].'),
    Mistake("no_max_subtraction", "exp without subtracting the row maximum (overflow)",
            ((LAST, "return filled.exp() / filled.exp().sum(-1, keepdim=True) * keep"),),
            explain='exp(score) overflows to inf for large scores (float32 overflows above ~88), and inf/inf is NaN.',
            hint='Subtract the row maximum before exp, or simply call torch.softmax, which does it for you.'),
    Mistake("nan_rows", "-inf fill without a guard: fully masked rows become NaN", ((FILL, 'float("-inf")'),),
            explain='With -inf fills, a row whose keys are all masked is softmax of all -inf = 0/0 = NaN.',
            hint='After the softmax, zero rows with no valid key (torch.where(mask, weights, 0) or nan_to_num), or fill with a finite very negative number and multiply by the mask.'),
    Mistake("uniform_rows", "fully masked rows left uniform instead of zero", ((LAST, "return torch.softmax(filled, dim=-1)"),),
            explain='With a finite fill, a row whose keys are all masked becomes a uniform 1/Tk row instead of zeros.',
            hint='Multiply the weights by the mask after the softmax so that fully masked rows are exactly 0.'),
    Mistake("in_place", "scores modified in place", (("scores.masked_fill(", "scores.masked_fill_("),),
            explain="The function changed the caller's scores tensor (masked_fill_, index assignment or +=); the caller's data is corrupted and autograd may fail.",
            hint='Use the out-of-place forms: masked_fill (no underscore), torch.where, or clone first.'),
    Mistake("lens_ignored", "valid_lens ignored", (("if valid_lens is None:", "if True:"),),
            explain='valid_lens was not applied: padded keys get attention weight.',
            hint='When valid_lens is not None, build the mask and apply it before the softmax.'),
)


ZH = {
    "title": "带掩码的 softmax",
    "summary": "只在每个查询可见的键上做 softmax；被屏蔽的键权重严格为 0。",
    "hints": (
        "用 torch.arange(Tk) < lens[..., None] 从 valid_lens 构造形状为 (B, Tq, Tk) 的布尔掩码；"
        "(B,) 形状的长度作用于该批次行的所有查询，所以给它补一个大小为 1 的 Tq 轴。",
        "softmax 之前把被屏蔽的分数换成一个很小的负数（不能用 0：exp(0) 并不小），"
        "softmax 之后再把被屏蔽的权重置为严格的 0，这样 valid_len 为 0 的行全为 0，而不是均匀分布。",
        "weights = torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1) * mask；"
        "valid_lens 为 None 时就是在最后一维上的普通 softmax。",
    ),
    "statements": (
        "在最后一维上、只对有效的键位置做 softmax。\n\n"
        "对有效的 j：weights[b, i, j] = exp(scores[b, i, j]) / 对有效 j' 求和 exp(scores[b, i, j'])；\n"
        "被屏蔽的 j 严格为 0。valid_len 为 0 的行全为 0（不能是 NaN，也不能是均匀分布）。\n"
        "float32 下分数绝对值达到 1e4 时结果仍有限。\n"
        "不要原地修改 scores；结果对 scores 保持可导。",
    ),
    "mistakes": {
        "wrong_axis": ("softmax 用错了轴",
                       "softmax 在查询（或批次）轴上做，而不是在键轴上：每行在 Tk 上的和不为 1，每个键的权重还受其他查询影响。",
                       "在最后一维上归一化：torch.softmax(x, dim=-1)。"),
        "fill_zero": ("被屏蔽的分数填成了 0，而不是一个很小的负数",
                      "分数被置为 0 的键相对其他键仍有 exp(0) = 1 的权重：被屏蔽的键漏了进来，有效权重变小。",
                      "用很小的负数（torch.finfo(scores.dtype).min）或 -inf 填充被屏蔽的分数，不要用 0。"),
        "mask_after_softmax": ("softmax 之后才加掩码，且没有重新归一化",
                               "softmax 在所有键上计算，掩码只是事后把被屏蔽的权重清零，所以有效权重之和不再是 1。",
                               "在 softmax 之前加掩码（用很小的负数填充被屏蔽的分数），或清零后重新归一化。"),
        "off_by_one": ("长度差了一（j <= valid_len）",
                       "当 j < valid_len 时键 j 才有效；用 <=（或 valid_len - 1）会多放进一个被屏蔽的键，或丢掉一个有效的键。",
                       "用 torch.arange(Tk) < lens[..., None] 构造掩码。"),
        "lens_2d_ignored": ("没有处理二维的 valid_lens (B, Tq)",
                            "(B, Tq) 形状的 valid_lens 为每个查询给一个长度；把它当作 (B,) 处理会在错误的轴上广播，或者直接报错。",
                            "二维 valid_lens 直接用 lens[..., None]；只有一维 (B,) 的长度才需要补一个 Tq 轴：lens[:, None, None]。"),
        "no_max_subtraction": ("求 exp 前没有减去行最大值（溢出）",
                               "分数较大时 exp(score) 溢出为 inf（float32 超过约 88 就溢出），而 inf/inf 是 NaN。",
                               "求 exp 前减去行最大值，或者直接调用 torch.softmax，它会替你做这件事。"),
        "nan_rows": ("用 -inf 填充却没有保护：整行被屏蔽时变成 NaN",
                     "用 -inf 填充时，所有键都被屏蔽的行做 softmax 得到 0/0 = NaN。",
                     "softmax 之后把没有有效键的行清零（torch.where(mask, weights, 0) 或 nan_to_num），"
                     "或者用有限的很小负数填充并乘以掩码。"),
        "uniform_rows": ("整行被屏蔽时留成了均匀分布，而不是 0",
                         "用有限值填充时，所有键都被屏蔽的行会变成 1/Tk 的均匀行，而不是全 0。",
                         "softmax 之后把权重乘以掩码，让整行被屏蔽的行严格为 0。"),
        "in_place": ("原地修改了 scores",
                     "函数改动了调用者的 scores 张量（masked_fill_、下标赋值或 +=）：调用者的数据被破坏，autograd 也可能出错。",
                     "使用非原地的写法：masked_fill（不带下划线）、torch.where，或者先 clone。"),
        "lens_ignored": ("忽略了 valid_lens",
                         "没有应用 valid_lens：填充位置的键得到了注意力权重。",
                         "valid_lens 不为 None 时，构造掩码并在 softmax 之前应用。"),
    },
}


PROBLEM = Problem(
    id="masked_softmax",
    title="Masked softmax",
    summary="Softmax over the keys that each query may see; masked keys get exactly 0.",
    symbol="masked_softmax",
    points={
        "shapes": 1, "weight_sums": 3, "parity_float64": 2, "parity_float32": 1, "gradients": 2,
        "masking": 2, "stability": 2, "side_effects": 1, "cuda": 1, "cuda_half": 1,
    },
    hints=(
        "Build a boolean mask of shape (B, Tq, Tk) from valid_lens with torch.arange(Tk) < lens[..., None]; "
        "a (B,) length applies to every query of its batch row, so give it a Tq axis of size 1.",
        "Replace masked scores by a very negative number before the softmax (not 0: exp(0) is not small), "
        "then set masked weights to exactly 0 afterwards so that a row with valid_len 0 is all zeros, not uniform.",
        "weights = torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1) * mask; "
        "with valid_lens None it is a plain softmax over the last axis.",
    ),
    methods=(
        Method(
            signature="def masked_softmax(scores, valid_lens=None):",
            statement=(
                "Softmax over the last axis, over valid key positions only.\n\n"
                "weights[b, i, j] = exp(scores[b, i, j]) / sum over valid j' of exp(scores[b, i, j'])\n"
                "for valid j, and exactly 0 for masked j. A row with valid_len 0 is all zeros\n"
                "(never NaN, never uniform). Finite for scores of magnitude 1e4 in float32.\n"
                "Do not modify scores in place; stay differentiable with respect to scores."
            ),
            args=(Arg("scores", "(B, Tq, Tk) float tensor", "scores"), Arg("valid_lens", LENS_DOC, "lengths")),
            returns=(Out("weights", "(B, Tq, Tk), same dtype and device as scores", "weights"),),
        ),
    ),
    inputs=_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": _amplify},
    },
    negative=_negative,
    mistakes=MISTAKES,
    track="warm-up",
    after=("numpy_additive_attention",),
    zh=ZH,
)
