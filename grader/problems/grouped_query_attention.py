"""Spec: grouped-query attention (MQA and MHA as its extremes), keys and values never repeated per head."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import (
    LLM_BANNED, BOOLEAN_MASK_MISTAKES, FILL, MASK_DOC, MASKED, amplify_qk, negative_qk, not_dividing, split_qk,
)

Q = "q = queries.reshape(B, Hkv, G * Tq, d)"
SCORES = "scores = q @ keys.transpose(-2, -1) / d**0.5"
BACK = "scores = scores.reshape(B, Hq, Tq, Tk)"
OUT = "output = weights.reshape(B, Hkv, G * Tq, Tk) @ values"
RET = "return output.reshape(B, Hq, Tq, -1), weights"

MISTAKES = BOOLEAN_MASK_MISTAKES + (
    Mistake("head_mod_mapping", "query head n paired with key/value head n % Hkv instead of n // G",
            ((Q, "q = queries.reshape(B, G, Hkv, Tq, d).transpose(1, 2).reshape(B, Hkv, G * Tq, d)"),
             (BACK, "scores = scores.reshape(B, Hkv, G, Tq, Tk).transpose(1, 2).reshape(B, Hq, Tq, Tk)"),
             (OUT, "output = weights.reshape(B, G, Hkv, Tq, Tk).transpose(1, 2).reshape(B, Hkv, G * Tq, Tk) @ values"),
             (RET, "return output.reshape(B, Hkv, G, Tq, -1).transpose(1, 2).reshape(B, Hq, Tq, -1), weights")),
            explain="Groups are consecutive: query heads 0..G-1 share key/value head 0, heads G..2G-1 head 1, and so on "
                    "(head n reads n // G, the convention of repeat_interleave and of enable_gqa=True). n % Hkv deals "
                    "the heads out in turn instead.",
            hint="Query head n uses key/value head n // G: queries.reshape(B, Hkv, G, Tq, d) groups them that way."),
    Mistake("repeat_not_interleave", "keys and values tiled with repeat (head n -> n % Hkv), a copy per query head",
            ((Q, "q = queries"), (SCORES, "scores = q @ keys.repeat(1, G, 1, 1).transpose(-2, -1) / d**0.5"),
             (OUT, "output = weights @ values.repeat(1, G, 1, 1)")),
            explain="keys.repeat(1, G, 1, 1) lays the heads out as 0, 1, .., Hkv-1, 0, 1, ..: query head n meets key head "
                    "n % Hkv, not n // G; and it copies every key and value once per query head.",
            hint="Do not copy K/V: fold the group into the query axis (queries.reshape(B, Hkv, G * Tq, d))."),
    Mistake("kv_repeated", "keys and values repeated per query head (repeat_interleave): right values, G times the memory",
            ((Q, "q = queries"), (SCORES, "scores = q @ keys.repeat_interleave(G, dim=1).transpose(-2, -1) / d**0.5"),
             (OUT, "output = weights @ values.repeat_interleave(G, dim=1)")),
            explain="The point of GQA is a KV cache G times smaller: repeating K and V per query head (Hugging Face's "
                    "repeat_kv) rebuilds the full-size copies during every call.",
            hint="Reshape the queries to (B, Hkv, G*Tq, d) and multiply by the shared keys; reshape back afterwards."),
    Mistake("no_scaling", "scores not scaled", ((SCORES, "scores = q @ keys.transpose(-2, -1)"),),
            explain="Without 1/sqrt(d) the scores grow with d and the softmax saturates.",
            hint="Divide q @ k^T by sqrt(d), d = queries.shape[-1]."),
    Mistake("scale_by_dv", "scaled by the values' feature size instead of d",
            ((SCORES, "scores = q @ keys.transpose(-2, -1) / values.shape[-1] ** 0.5"),),
            explain="d is the size of the vectors being dotted (queries and keys), not of the values.",
            hint="d = queries.shape[-1]."),
    Mistake("softmax_wrong_axis", "softmax over queries (dim=-2) instead of keys",
            (("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),
             ("torch.softmax(filled, dim=-1)", "torch.softmax(filled, dim=-2)")),
            explain="Each query distributes its attention over the keys: rows (the last axis) must sum to 1.",
            hint="torch.softmax(scores, dim=-1)."),
    Mistake("nan_rows", "rows with no allowed key come out NaN (-inf fill, no guard)",
            ((FILL, 'filled = scores.masked_fill(~mask, float("-inf"))'), (MASKED, "weights = torch.softmax(filled, dim=-1)")),
            explain="softmax of a row of -inf is 0/0 = NaN; the contract wants all zeros there.",
            hint="Fill with torch.finfo(dtype).min, or zero those rows afterwards: weights * mask."),
    Mistake("heads_not_checked", "Hq not divisible by Hkv accepted",
            (("    if Hq % Hkv:\n", "    if False:\n"),),
            explain="With Hq % Hkv != 0 the heads cannot be grouped evenly; the contract raises ValueError.",
            hint="if Hq % Hkv: raise ValueError(...)."),
    Mistake("library_call", "calls F.scaled_dot_product_attention(..., enable_gqa=True)",
            ((RET, "return torch.nn.functional.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, "
                   "enable_gqa=True), weights"),),
            explain="That function is the grader's oracle, not yours to call: it is banned here, and on some paths it "
                    "repeats K/V itself.",
            hint="output = weights @ values, with the group folded into the query axis."),
)


def _fit(cfg, variant):
    return {**cfg, **variant, "Hq": variant["Hkv"] * variant["G"], "dk": cfg["dq"], "d": cfg["dq"]}


def _inputs(cfg, gen):
    """queries (B, Hq, Tq, d), keys (B, Hkv, Tk, d), values (B, Hkv, Tk, dv), standard normal."""
    B, Hq, Hkv, d = cfg["B"], cfg["Hq"], cfg["Hkv"], cfg["dq"]
    shapes = [(B, Hq, cfg["Tq"], d), (B, Hkv, cfg["Tk"], d), (B, Hkv, cfg["Tk"], cfg["dv"])]
    return [torch.randn(*s, generator=gen, dtype=torch.float64) for s in shapes]


def _oracle(call):
    """torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True) (its weights: identity values)"""
    q, k, v, mask = call["args"]
    if mask is not None:
        mask = mask.expand(*q.shape[:-1], k.shape[-2])
    F = torch.nn.functional
    eye = torch.eye(k.shape[-2], dtype=k.dtype).expand(*k.shape[:-1], k.shape[-2])
    return [F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True),
            F.scaled_dot_product_attention(q, k, eye, attn_mask=mask, enable_gqa=True)]


def _memory_fit(cfg):
    """Decoding-like dims: Tq < d, Tq < dv, Tq < Tk and B*Hkv >= 2, where a per-head copy of K or V exceeds the bound."""
    return {**cfg, "B": 2, "Tq": 2, "Tk": 64, "dq": 32, "dk": 32, "d": 32, "dv": 48}


BACKSTOP = {
    "dims": {"B": 1, "Hq": 64, "Hkv": 1, "G": 64, "Tq": 1, "Tk": 4096, "dq": 128, "dk": 128, "d": 128, "dv": 128},
    "args": {},
    "allowed": lambda cfg, args: max(cfg["Tk"] * cfg["dq"], cfg["Hq"] * cfg["Tk"]),
    "resident_kb": 64 * 1024,
    "held_kb": 96 * 1024,
}
"""A float32 decoding step (one query, 64 query heads sharing one K/V head of 4096 keys, d = 128), measured from outside
the worker (run/cgroup.py): keys or values repeated per query head take 128 MB each; folding the group into the query
axis needs the 2 MB inputs and the (Hq, Tk) scores, 1 MB."""


def _memory(cfg, args):
    """One call: max(S, B*Hq*Tq*Tk, B*Hq*Tq*dv) elements allowed, S the largest input (mask included)."""
    S = max(a.numel() for a in args if isinstance(a, torch.Tensor))
    B, Hq, Tq = cfg["B"], cfg["Hq"], cfg["Tq"]
    return [({}, max(S, B * Hq * Tq * cfg["Tk"], B * Hq * Tq * cfg["dv"]))]


PROBLEM = Problem(
    id="grouped_query_attention",
    title="Grouped-query attention",
    summary="Hq query heads share Hkv key/value heads (MQA and MHA at the extremes), without copying K/V per head.",
    symbol="grouped_query_attention",
    points={"shapes": 1, "weight_sums": 2, "parity_float64": 3, "parity_float32": 1, "oracle": 2, "gradients": 2,
            "masking": 2, "stability": 1, "side_effects": 1, "memory": 2, "value_errors": 1,
            "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "G = Hq // Hkv; query head n uses key/value head n // G (consecutive groups). Hq not divisible by Hkv "
        "raises ValueError.",
        "Do not copy K/V: fold a group's G query heads into the query axis, queries.reshape(B, Hkv, G*Tq, d) @ "
        "keys.transpose(-2, -1), then reshape the scores back to (B, Hq, Tq, Tk). Mask and softmax as in scaled "
        "dot-product attention.",
        "q = queries.reshape(B, Hkv, G*Tq, d); scores = (q @ k^T / sqrt(d)).reshape(B, Hq, Tq, Tk); weights = "
        "softmax(filled scores) * mask; output = (weights.reshape(B, Hkv, G*Tq, Tk) @ v).reshape(B, Hq, Tq, dv).",
    ),
    methods=(
        Method(
            signature="def grouped_query_attention(queries, keys, values, mask=None):",
            statement=(
                "Query head n attends with key/value head n // G, G = Hq // Hkv (Hq % Hkv != 0 raises ValueError).\n"
                "weights = softmax(q k^T / sqrt(d)) over the allowed keys, exactly 0 elsewhere, all zeros on a row\n"
                "with no allowed key; output = weights @ values. Keys and values are not repeated per query head:\n"
                "no tensor an operation allocates during the call has more than max(S, B*Hq*Tq*Tk, B*Hq*Tq*dv)\n"
                "elements, S the largest input. Do not call F.scaled_dot_product_attention."
            ),
            args=(Arg("queries", "(B, Hq, Tq, d)", "query"), Arg("keys", "(B, Hkv, Tk, d)", "key"),
                  Arg("values", "(B, Hkv, Tk, dv)", "value"), Arg("mask", MASK_DOC + ", up to (B, Hq, Tq, Tk)", "mask")),
            returns=(Out("output", "(B, Hq, Tq, dv)", "values"), Out("weights", "(B, Hq, Tq, Tk)", "weights")),
        ),
    ),
    variants=({"Hkv": 2, "G": 3}, {"Hkv": 1, "G": 4}, {"Hkv": 4, "G": 1}),
    fit=_fit,
    inputs=_inputs,
    negative=negative_qk,
    mistakes=MISTAKES,
    banned=LLM_BANNED,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "memory": {
            "calls": _memory,
            "fit": _memory_fit,
            "backstop": BACKSTOP,
            "words": {"bound": "max(S, B*Hq*Tq*Tk, B*Hq*Tq*dv)", "tensor": "a copy of keys or values per query head",
                      "advice": "Keys and values must not be repeated per query head: fold the group into the query axis "
                                "(queries.reshape(B, Hkv, G*Tq, d)) and reshape the results back"},
        },
        "stability": {"amplify": amplify_qk, "split": split_qk, "long": True},
        "value_errors": {"calls": lambda cfg: tuple(
            ({"keys": torch.zeros(cfg["B"], h, cfg["Tk"], cfg["dq"], dtype=torch.float64),
              "values": torch.zeros(cfg["B"], h, cfg["Tk"], cfg["dv"], dtype=torch.float64)}, why, ())
            for h, why in not_dividing(cfg["Hq"]))},
        "oracle": {"call": _oracle},
    },
    track="LLM",
    after=("scaled_dot_product_attention",),
)
