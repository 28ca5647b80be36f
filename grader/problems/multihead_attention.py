"""Spec: Transformer multi-head attention (batch first)."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import BANNED, BOOLEAN_MASK_MISTAKES, MASK_DOC, ProjectedHeads, concat_no_transpose, dropout_mistakes

SCORES = "scores = q @ k.transpose(-2, -1) / d**0.5"
RETURN = "return self.W_o(context.transpose(1, 2).reshape(B, Tq, H * d)), weights"
CONTEXT = "context = self.dropout(weights) @ v"
MISTAKES = BOOLEAN_MASK_MISTAKES + (
    Mistake("scale_by_d", "scores divided by d instead of sqrt(d)", ((SCORES, "scores = q @ k.transpose(-2, -1) / d"),),
            explain="The scale is 1/sqrt(d), d = embed_dim // num_heads.",
            hint="scores = q @ k^T / math.sqrt(d)."),
    Mistake("scale_by_embed_dim", "scaled by sqrt(embed_dim) instead of sqrt(head dim)",
            ((SCORES, "scores = q @ k.transpose(-2, -1) / (H * d) ** 0.5"),),
            explain="Each head dots vectors of d = embed_dim // num_heads features, so the scale is 1/sqrt(d), "
                    "not 1/sqrt(embed_dim).",
            hint="d = embed_dim // num_heads; divide by d ** 0.5."),
    Mistake("heads_no_transpose", "heads split by a view without transpose (head and time axes mixed)",
            (("self.W_q(queries).view(B, Tq, H, d).transpose(1, 2)", "self.W_q(queries).view(B, H, Tq, d)"),
             ("self.W_k(keys).view(B, Tk, H, d).transpose(1, 2)", "self.W_k(keys).view(B, H, Tk, d)"),
             ("self.W_v(values).view(B, Tk, H, d).transpose(1, 2)", "self.W_v(values).view(B, H, Tk, d)")),
            explain="(B, T, E) viewed straight as (B, H, T, d) mixes time steps and heads: the head axis must be split "
                    "off the feature axis first.",
            hint="x.view(B, T, H, d).transpose(1, 2), not x.view(B, H, T, d)."),
    Mistake("no_bias", "W_o without a bias",
            (("self.W_o = nn.Linear(embed_dim, embed_dim)", "self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)"),),
            explain="All four projections have a bias here (as in nn.MultiheadAttention): W_q, W_k, W_v, W_o = "
                    "nn.Linear(embed_dim, embed_dim).",
            hint="nn.Linear(embed_dim, embed_dim) (bias=True is the default)."),
    Mistake("weights_averaged", "weights averaged over heads instead of returned per head",
            ((RETURN, "return self.W_o(context.transpose(1, 2).reshape(B, Tq, H * d)), weights.mean(1)"),),
            explain="The weights come back per head, (B, H, Tq, Tk): nn.MultiheadAttention's average_attn_weights=False.",
            hint="Return the (B, H, Tq, Tk) weights as they are."),
    Mistake("concat_wrong_order", "head contexts concatenated feature-major instead of head-major",
            ((RETURN, "return self.W_o(context.permute(0, 2, 3, 1).reshape(B, Tq, H * d)), weights"),),
            explain="Head n's context fills features n*d:(n+1)*d of the concatenation, in head order.",
            hint="context (B, H, Tq, d).transpose(1, 2).reshape(B, Tq, H * d)."),
    Mistake("weights_after_dropout", "weights returned after dropout",
            ((CONTEXT, "weights = self.dropout(weights)\n        context = weights @ v"),),
            explain="The returned weights are the softmax output, before dropout; only the copy that multiplies v drops.",
            hint="context = self.dropout(weights) @ v; return the undropped weights."),
    Mistake("dropout_in_eval", "dropout active in eval() mode",
            ((CONTEXT, "context = torch.nn.functional.dropout(weights, self.dropout.p, training=True) @ v"),),
            explain="Dropout must do nothing in eval() mode.",
            hint="Use the nn.Dropout module, or F.dropout(x, p, training=self.training)."),
    Mistake("library_call", "calls F.scaled_dot_product_attention for the context",
            ((CONTEXT, "context = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)"),),
            explain="PyTorch's attention functions are banned here; the grader intercepts the call.",
            hint="context = self.dropout(weights) @ v, with weights computed by you."),
    Mistake("fixed_dtype", "scores cast to float32 (.float()), whatever the inputs' dtype",
            ((SCORES, "scores = (q @ k.transpose(-2, -1) / d**0.5).float()"),),
            explain="A hard-coded dtype loses float64 precision and breaks the next matmul with v.",
            hint="Keep the inputs' dtype: no .float()."),
    Mistake("mask_3d_as_batch", "a 3-D mask taken as (B, Tq, Tk) and given a head axis",
            (("if mask is None:", "if mask is not None and mask.dim() == 3:\n            mask = mask[:, None]\n        if mask is None:"),),
            explain="The mask broadcasts to (B, H, Tq, Tk) from the right, like any tensor: a 3-D mask is (H, Tq, Tk), one "
                    "per head for every batch row. A per-batch mask (B, Tq, Tk) is passed as mask[:, None] by the caller.",
            hint="Use the mask as given (scores.masked_fill(~mask, ...) broadcasts it); do not reshape it by its number of dims."),
    concat_no_transpose(RETURN, 'return self.W_o(context.reshape(B, Tq, H * d)), weights'),
) + dropout_mistakes('context = self.dropout(weights) @ v', 'context = self.dropout(weights @ v)')


def _fit(cfg, variant):
    return {**cfg, "E": cfg["H"] * cfg["dq"]}


def _inputs(cfg, gen):
    """queries (B, Tq, E), keys and values (B, Tk, E), standard normal."""
    B, E = cfg["B"], cfg["E"]
    return [torch.randn(B, t, E, generator=gen, dtype=torch.float64) for t in (cfg["Tq"], cfg["Tk"], cfg["Tk"])]


def _params(cfg):
    E = cfg["E"]
    return {f"{w}.{p}": (E, E) if p == "weight" else (E,) for w in ("W_q", "W_k", "W_v", "W_o") for p in ("weight", "bias")}


HEADS = ProjectedHeads("dq")


def _oracle(call):
    """torch.nn.MultiheadAttention (batch_first, eval(), the same weights, the mask inverted)"""
    E, H = call["ctor"]["args"]
    q, k, v, mask = call["args"]
    s = call["state"]
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=q.dtype).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([s["W_q.weight"], s["W_k.weight"], s["W_v.weight"]]))
        mha.in_proj_bias.copy_(torch.cat([s["W_q.bias"], s["W_k.bias"], s["W_v.bias"]]))
        mha.out_proj.weight.copy_(s["W_o.weight"])
        mha.out_proj.bias.copy_(s["W_o.bias"])
        B, Tq, Tk = q.shape[0], q.shape[1], k.shape[1]
        attn_mask = None if mask is None else ~mask.expand(B, H, Tq, Tk).reshape(B * H, Tq, Tk)
        out, weights = mha(q, k, v, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
    return [out, weights]


PROBLEM = Problem(
    id="multihead_attention",
    title="Transformer multi-head attention",
    summary="Project q, k, v; scaled dot-product attention per head with a boolean mask; concatenate; W_o.",
    symbol="MultiHeadAttention",
    points={"parameters": 2, "shapes": 1, "weight_sums": 2, "parity_float64": 3, "parity_float32": 1, "oracle": 2,
            "gradients": 2, "masking": 2, "stability": 1, "side_effects": 1, "dropout": 1,
            "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "Project first, then split heads: W_q(queries) is (B, Tq, E); view it as (B, Tq, H, d) and transpose to "
        "(B, H, Tq, d), d = E // H. Head n owns features n*d:(n+1)*d.",
        "Per head this is scaled dot-product attention: (B, H, Tq, d) @ (B, H, d, Tk) / sqrt(d), masked where the "
        "mask is False, softmax over keys, rows with no allowed key set to 0. Dropout only on the copy of the "
        "weights that multiplies v.",
        "context = dropout(weights) @ v is (B, H, Tq, d); output = W_o(context.transpose(1, 2).reshape(B, Tq, E)); "
        "return output, weights (per head, before dropout).",
    ),
    class_doc="Transformer multi-head attention (batch first): H scaled dot-product heads, then W_o.",
    methods=(
        Method(
            signature="def __init__(self, embed_dim, num_heads, dropout=0.0):",
            statement=(
                "embed_dim % num_heads != 0 raises ValueError. Create exactly these parameters, each with a bias,\n"
                "and a dropout of probability `dropout`:\n"
                "W_q, W_k, W_v, W_o = nn.Linear(embed_dim, embed_dim)\n"
                "Head n uses features n*d:(n+1)*d of the projected q, k, v, d = embed_dim // num_heads."
            ),
            args=(("embed_dim", "E"), ("num_heads", "H"), ("dropout", "probability, 0.0 by default")),
        ),
        Method(
            signature="def forward(self, queries, keys, values, mask=None):",
            statement=(
                "Per head: weights = softmax(q k^T / sqrt(d)) over allowed keys, exactly 0 elsewhere (all zeros, and\n"
                "that head's context 0, on a row with no allowed key); context = dropout(weights) @ v; heads\n"
                "concatenated in order, then W_o. The weights are returned per head, before dropout. A per-batch\n"
                "mask (B, Tq, Tk) is passed as mask[:, None]. In eval() it equals nn.MultiheadAttention(E, H,\n"
                "batch_first=True) with the same weights and the inverted mask; do not call it (nor\n"
                "F.scaled_dot_product_attention): the grader intercepts them."
            ),
            args=(Arg("queries", "(B, Tq, E)", "query"), Arg("keys", "(B, Tk, E)", "key"),
                  Arg("values", "(B, Tk, E)", "value"), Arg("mask", MASK_DOC, "mask")),
            returns=(Out("output", "(B, Tq, E)", "values"), Out("weights", "(B, H, Tq, Tk)", "weights")),
        ),
    ),
    imports="import torch\nfrom torch import nn\n",
    ctor=lambda c: {"embed_dim": c["E"], "num_heads": c["H"], "dropout": c.get("dropout", 0.0)},
    ctor_required=2,
    fit=_fit,
    params=_params,
    inputs=_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": HEADS.amplify, "split": HEADS.split, "long": True},
        "parameters": {"errors": (({"embed_dim": 6, "num_heads": 4}, "embed_dim not divisible by num_heads", ()),)},
        "oracle": {"call": _oracle},
    },
    negative=HEADS.negative,
    mistakes=MISTAKES,
    banned=BANNED,
    track="transformer",
    after=('scaled_dot_product_attention', 'multihead_additive_attention'),
)
