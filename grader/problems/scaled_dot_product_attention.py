"""Spec: scaled dot-product attention with a boolean mask and any leading dims."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import (
    BANNED, BOOLEAN_MASK_MISTAKES, FILL, MASK_DOC, MASKED, negative_qk, split_qk,
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
        "stability": {"amplify": amplify_qk, "split": split_qk, "long": True},
        "oracle": {"call": _oracle},
    },
    negative=negative_qk,
    mistakes=MISTAKES,
    banned=BANNED,
    track="masking",
    after=('luong_attention',),
)
