"""Spec: scaled dot-product attention with a boolean mask and any leading dims."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import (
    BANNED, BOOLEAN_MASK_MISTAKES, BOOLEAN_MASK_MISTAKES_ZH, FILL, MASK_DOC, MASKED, negative_qk,
    QKV, amplify_qk, lead_fit, lead_inputs,
)

SCORES = "scores = queries @ keys.transpose(-2, -1) / d**0.5"
MISTAKES = BOOLEAN_MASK_MISTAKES + (
    Mistake("scale_by_d", "scores divided by d instead of sqrt(d)", ((SCORES, "scores = queries @ keys.transpose(-2, -1) / d"),),
            explain="The scale is 1/sqrt(d): q . k is a sum of d terms whose variance grows like d, so dividing by "
                    "sqrt(d) keeps it near 1; dividing by d flattens the softmax.",
            hint="scores = q @ k^T / math.sqrt(d)."),
    Mistake("no_scaling", "scores not scaled", ((SCORES, "scores = queries @ keys.transpose(-2, -1)"),),
            explain="Without 1/sqrt(d) the scores grow with d and the softmax saturates (vanishing gradients).",
            hint="Divide q @ k^T by sqrt(d), d = queries.shape[-1]."),
    Mistake("scale_by_dv", "scaled by the values' feature size instead of the queries'",
            (("d = queries.shape[-1]", "d = values.shape[-1]"),),
            explain="d is the size of the vectors being dotted (queries and keys), not of the values.",
            hint="d = queries.shape[-1]."),
    Mistake("softmax_wrong_axis", "softmax over queries (dim=-2) instead of keys",
            (("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"), ("torch.softmax(filled, dim=-1)", "torch.softmax(filled, dim=-2)")),
            explain="Each query distributes its attention over the keys: rows (the last axis) must sum to 1.",
            hint="torch.softmax(scores, dim=-1)."),
    Mistake("fixed_transpose", "keys transposed on dims (1, 2): right only for 3-D inputs",
            ((SCORES, "scores = queries @ keys.transpose(1, 2) / d**0.5"),),
            explain="With any number of leading dims, the dims to swap are the last two; transpose(1, 2) fails on 2-D "
                    "inputs and swaps heads with time on 4-D ones.",
            hint="keys.transpose(-2, -1) (or keys.mT)."),
    Mistake("nan_rows", "rows with no allowed key come out NaN (-inf fill, no guard)",
            ((FILL, 'filled = scores.masked_fill(~mask, float("-inf"))'), (MASKED, "weights = torch.softmax(filled, dim=-1)")),
            explain="softmax of a row of -inf is 0/0 = NaN; the contract wants all zeros there.",
            hint="Fill with torch.finfo(dtype).min, or zero those rows afterwards: weights * mask."),
    Mistake("uniform_rows", "rows with no allowed key come out uniform, not zero", ((MASKED, "weights = torch.softmax(filled, dim=-1)"),),
            explain="With a finite fill, a row whose keys are all masked has equal scores and softmax makes it uniform; "
                    "the contract wants all zeros there.",
            hint="Multiply by the mask after the softmax: torch.softmax(filled, -1) * mask."),
    Mistake("in_place", "queries scaled in place",
            ((SCORES, "queries /= d**0.5\n    scores = queries @ keys.transpose(-2, -1)"),),
            explain="`queries /= ...` changes the caller's tensor (and fails on tensors that require grad).",
            hint="queries @ keys.transpose(-2, -1) / d**0.5: an out-of-place division."),
    Mistake("library_call", "calls F.scaled_dot_product_attention",
            (("return weights @ values, weights",
              "return torch.nn.functional.scaled_dot_product_attention(queries, keys, values, attn_mask=mask), weights"),),
            explain="The exercise is to write it: PyTorch's own F.scaled_dot_product_attention (and the aten operators "
                    "behind it) are banned here, and the grader intercepts the call.",
            hint="output = weights @ values."),
)


def _oracle(call):
    """torch.nn.functional.scaled_dot_product_attention (its weights: the same call with identity values)"""
    q, k, v, mask = call["args"]
    if mask is not None:  # any broadcastable form, as the oracle wants it: (..., Tq, Tk)
        mask = mask.expand(*q.shape[:-1], k.shape[-2])
    F = torch.nn.functional
    eye = torch.eye(k.shape[-2], dtype=k.dtype).expand(*k.shape[:-1], k.shape[-2])
    return [F.scaled_dot_product_attention(q, k, v, attn_mask=mask), F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)]


ZH = {
    "title": "缩放点积注意力",
    "summary": "softmax(q k^T / sqrt(d))，带布尔掩码（True = 可关注），支持任意数量的前导维度。",
    "hints": (
        "只在最后两维上操作，这样二维、三维、四维输入都能用：keys.transpose(-2, -1) 和 @ 会在任意前导维度上广播。"
        "d 是查询的特征维度。",
        "掩码中 True 表示“可以关注”。softmax 之前把其他分数填成一个很小的有限负数（torch.finfo(dtype).min），"
        "在最后一维上做 softmax，再乘以掩码，使没有可关注键的行严格为 0。",
        "几乎就是答案了：scores = q @ k.transpose(-2, -1) / d**0.5；weights = torch.softmax(scores.masked_fill(~mask, "
        "torch.finfo(scores.dtype).min), -1) * mask；return weights @ v, weights",
    ),
    "statements": (
        "weights = 在可关注的键上做 softmax(q k^T / sqrt(d))，其他位置严格为 0；没有可关注键的行全为 0；\n"
        "output = weights @ values。前导维度可以有任意多个且相同（二维、三维、四维输入）。没有 dropout。\n"
        "不要调用 F.scaled_dot_product_attention、F.multi_head_attention_forward 或 nn.MultiheadAttention：\n"
        "评分器会拦截这些调用。",
    ),
    "mistakes": {
        **BOOLEAN_MASK_MISTAKES_ZH,
        "scale_by_d": ("分数除以了 d 而不是 sqrt(d)",
                       "缩放因子是 1/sqrt(d)：q . k 是 d 项之和，方差随 d 增长，除以 sqrt(d) 让它保持在 1 附近；除以 d 会让 softmax 过于平坦。",
                       "写成：scores = q @ k^T / math.sqrt(d)。"),
        "no_scaling": ("分数没有缩放",
                       "没有 1/sqrt(d) 时分数随 d 增大，softmax 饱和（梯度消失）。",
                       "把 q @ k^T 除以 sqrt(d)，d = queries.shape[-1]。"),
        "scale_by_dv": ("按 values 的特征维度缩放，而不是按查询的",
                        "d 是做点积的向量（查询和键）的维度，不是 values 的维度。",
                        "写成：d = queries.shape[-1]。"),
        "softmax_wrong_axis": ("softmax 在查询轴（dim=-2）上做，而不是在键轴上",
                               "每个查询把注意力分配到各个键上：行（最后一维）之和必须为 1。",
                               "写成：torch.softmax(scores, dim=-1)。"),
        "fixed_transpose": ("对键转置了第 (1, 2) 维：只对三维输入正确",
                            "前导维度个数任意时，要交换的是最后两维；transpose(1, 2) 在二维输入上会报错，在四维输入上会把头和时间互换。",
                            "keys.transpose(-2, -1)（或 keys.mT）。"),
        "nan_rows": ("没有可关注键的行变成 NaN（用 -inf 填充且没有保护）",
                     "一整行 -inf 的 softmax 是 0/0 = NaN；约定要求这些行全为 0。",
                     "用 torch.finfo(dtype).min 填充，或者事后把这些行清零：weights * mask。"),
        "uniform_rows": ("没有可关注键的行变成均匀分布，而不是 0",
                         "用有限值填充时，所有键都被屏蔽的行分数全相等，softmax 后是均匀分布；约定要求全为 0。",
                         "softmax 之后乘以掩码：torch.softmax(filled, -1) * mask。"),
        "in_place": ("原地缩放了 queries",
                     "`queries /= ...` 会改动调用者的张量（而且对需要梯度的张量会报错）。",
                     "queries @ keys.transpose(-2, -1) / d**0.5：非原地的除法。"),
        "library_call": ("调用了 F.scaled_dot_product_attention",
                         "这道题要你自己写：PyTorch 自带的 F.scaled_dot_product_attention（以及它背后的 aten 算子）在这里被禁止，评分器会拦截这个调用。",
                         "写成：output = weights @ values。"),
    },
}


PROBLEM = Problem(
    id="scaled_dot_product_attention",
    title="Scaled dot-product attention",
    summary="softmax(q k^T / sqrt(d)) with a boolean mask (True = attend) over any leading dims.",
    symbol="scaled_dot_product_attention",
    points={"shapes": 1, "weight_sums": 2, "parity_float64": 3, "parity_float32": 1, "oracle": 2, "gradients": 2,
            "masking": 2, "stability": 1, "side_effects": 1, "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "Work on the last two dims only, so 2-D, 3-D and 4-D inputs all work: keys.transpose(-2, -1) and @ "
        "broadcast over any leading dims. d is the queries' feature size.",
        "True in the mask means 'may attend'. Fill the other scores with a very negative finite number "
        "(torch.finfo(dtype).min) before the softmax over the last dim, then multiply by the mask so rows with "
        "no allowed key are exactly 0.",
        "scores = q @ k.transpose(-2, -1) / d**0.5; weights = torch.softmax(scores.masked_fill(~mask, "
        "torch.finfo(scores.dtype).min), -1) * mask; return weights @ v, weights",
    ),
    methods=(
        Method(
            signature="def scaled_dot_product_attention(queries, keys, values, mask=None):",
            statement=(
                "weights = softmax(q k^T / sqrt(d)) over the allowed keys, exactly 0 elsewhere, and all zeros on a\n"
                "row with no allowed key; output = weights @ values. Any number of equal leading dims (2-D, 3-D,\n"
                "4-D inputs). No dropout. Do not call F.scaled_dot_product_attention, F.multi_head_attention_forward\n"
                "or nn.MultiheadAttention: the grader intercepts them."
            ),
            args=(Arg("queries", "(..., Tq, d)", "query"), Arg("keys", "(..., Tk, d)", "key"),
                  Arg("values", "(..., Tk, dv)", "value"), Arg("mask", MASK_DOC, "mask")),
            returns=(Out("output", "(..., Tq, dv)", "values"), Out("weights", "(..., Tq, Tk)", "weights")),
        ),
    ),
    variants=({"rank": 3}, {"rank": 2}, {"rank": 4}),
    fit=lead_fit,
    inputs=lambda cfg, gen: lead_inputs(cfg, gen, *QKV),
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": amplify_qk},
        "oracle": {"call": _oracle},
    },
    negative=negative_qk,
    mistakes=MISTAKES,
    banned=BANNED,
    track="masking",
    after=('luong_attention',),
    zh=ZH,
)
