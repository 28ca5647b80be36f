"""Spec: encoder-decoder cross-attention with a cache of the projected memory, section 16 of the seq2seq stage."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import BANNED, BOOLEAN_MASK_MISTAKES, ProjectedHeads, concat_no_transpose, dropout_mistakes

PROJECT = "cache = (heads(self.W_k(memory)), heads(self.W_v(memory)))  # projected once: (B, H, S, d)"
SCORES = "scores = q @ k.transpose(-2, -1) / d**0.5  # (B, H, Tq, S)"
CONTEXT = "context = self.dropout(weights) @ v  # (B, H, Tq, d)"
RETURN = "return self.W_o(context.transpose(1, 2).reshape(B, Tq, E)), weights, cache"
MASK = "mask = memory_mask[:, None, None, :]  # (B, 1, 1, S): every head and query of the row"

MISTAKES = tuple(m for m in BOOLEAN_MASK_MISTAKES if m.id != "uniform_rows") + (  # its own empty_rows_uniform says it
    Mistake("empty_rows_uniform", "a row with no allowed memory position gets uniform weights (the mask only filled)",
            (("weights = torch.softmax(filled, dim=-1) * mask  # a row with no allowed position: all zeros",
              "weights = torch.softmax(filled, dim=-1)"),),
            explain="Filling the masked scores with a very negative number is not enough: where every position of a "
                    "row is masked, they are all equal, and the softmax spreads the weight evenly over the padding. The "
                    "contract gives such a row weights 0 and context 0.",
            hint="Multiply the weights by the mask after the softmax (or zero the rows with no allowed position)."),
    Mistake("cache_reprojected", "memory projected again when a cache is given",
            (("        if cache is None:\n            if memory is None:",
              "        if memory is not None:\n            cache = None\n        if cache is None:\n"
              "            if memory is None:"),),
            explain="The cache holds W_k(memory) and W_v(memory), projected once by the first decoding step; with a "
                    "cache every later step must use it and never read memory (a caller may pass memory=None, or a "
                    "memory that is no longer the one the cache came from).",
            hint="if cache is None: project memory into (k, v); else take (k, v) = cache and ignore memory."),
    Mistake("cache_unprojected", "the cache holds the memory itself, projected again at every call",
            ((PROJECT, "cache = (memory, memory)"),
             ("        k, v = cache\n", "        k, v = heads(self.W_k(cache[0])), heads(self.W_v(cache[1]))\n")),
            explain="The cache is what makes decoding cheap: W_k(memory) and W_v(memory) split into heads, (B, H, S, d) "
                    "each, so that no step projects the memory again. Caching the raw memory saves nothing and gives "
                    "a cache of another shape than the contract's.",
            hint="cache = (heads(W_k(memory)), heads(W_v(memory))), each (B, H, S, d); return it as it is."),
    Mistake("cache_kv_swapped", "the cache returned as (v, k)",
            ((RETURN, "return self.W_o(context.transpose(1, 2).reshape(B, Tq, E)), weights, cache[::-1]"),),
            explain="The cache is (k, v) in this order: the next step takes the keys from its first tensor. Returned "
                    "as (v, k), every later step scores the queries against the values.",
            hint="return output, weights, (k, v)."),
    Mistake("mask_heads_for_batch", "memory_mask (B, S) given one new axis: it broadcasts over the heads, not the batch",
            ((MASK, "mask = memory_mask[:, None, :]"),),
            explain="The scores are (B, H, Tq, S): broadcasting lines axes up from the right, so a (B, 1, S) mask puts "
                    "the batch axis against the heads (batch row b masks head b, or the shapes clash). The mask needs "
                    "both new axes: (B, 1, 1, S).",
            hint="memory_mask[:, None, None, :] (or .view(B, 1, 1, S))."),
    Mistake("weights_averaged", "weights averaged over heads instead of returned per head",
            ((RETURN, "return self.W_o(context.transpose(1, 2).reshape(B, Tq, E)), weights.mean(1), cache"),),
            explain="The weights come back per head, (B, H, Tq, S): the alignment a learner plots, as "
                    "nn.MultiheadAttention's average_attn_weights=False.",
            hint="Return the (B, H, Tq, S) weights as they are."),
    Mistake("scale_by_sqrt_E", "scores scaled by 1/sqrt(E) instead of 1/sqrt(d)",
            ((SCORES, "scores = q @ k.transpose(-2, -1) / (H * d) ** 0.5"),),
            explain="Each head's scores are dot products of d features: the scale is 1/sqrt(d), d = E // H.",
            hint="scores = q @ k^T / math.sqrt(d), d the head size."),
    Mistake("heads_no_transpose", "heads split by a view without transpose (head and position axes mixed)",
            (("heads = lambda t: t.view(t.shape[0], t.shape[1], H, d).transpose(1, 2)",
              "heads = lambda t: t.view(t.shape[0], H, t.shape[1], d)"),),
            explain="(B, T, E) viewed straight as (B, H, T, d) mixes positions and heads: the head axis must be split "
                    "off the feature axis first.",
            hint="t.view(B, T, H, d).transpose(1, 2), not t.view(B, H, T, d)."),
    Mistake("no_bias_kv", "W_k and W_v without a bias",
            (("self.W_k = nn.Linear(memory_dim, embed_dim)", "self.W_k = nn.Linear(memory_dim, embed_dim, bias=False)"),
             ("self.W_v = nn.Linear(memory_dim, embed_dim)", "self.W_v = nn.Linear(memory_dim, embed_dim, bias=False)")),
            explain="All four projections have a bias here (as in nn.MultiheadAttention), and the cache holds W_k(memory) "
                    "and W_v(memory) with their biases.",
            hint="nn.Linear(memory_dim, embed_dim) (bias=True is the default)."),
    Mistake("weights_after_dropout", "weights returned after dropout",
            ((CONTEXT, "weights = self.dropout(weights)\n        context = weights @ v"),),
            explain="The returned weights are the softmax output, before dropout; only the copy that multiplies v drops.",
            hint="context = self.dropout(weights) @ v; return the undropped weights."),
    Mistake("dropout_in_eval", "dropout active in eval() mode",
            ((CONTEXT, "context = torch.nn.functional.dropout(weights, self.dropout.p, training=True) @ v"),),
            explain="Dropout must do nothing in eval() mode.",
            hint="Use the nn.Dropout module, or F.dropout(x, p, training=self.training)."),
    Mistake("library_call", "calls F.scaled_dot_product_attention for the context",
            ((CONTEXT, "context = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None if "
                       "memory_mask is None else memory_mask[:, None, None, :])"),),
            explain="PyTorch's attention functions are banned here; the grader intercepts the call.",
            hint="context = self.dropout(weights) @ v, with weights computed by you."),
    concat_no_transpose(RETURN, "return self.W_o(context.reshape(B, Tq, E)), weights, cache"),
) + dropout_mistakes(CONTEXT, "context = self.dropout(weights @ v)")


def _fit(cfg, variant):
    """d = dq, E = H * d, S = Tk; memory_dim left out (E_mem = E) or given as E + dk."""
    E = cfg["H"] * cfg["dq"]
    return {**cfg, **variant, "d": cfg["dq"], "E": E, "S": cfg["Tk"], "E_mem": E + cfg["dk"] if variant["memory_dim"] == "E+dk" else E}


def _ctor(c):
    return {"embed_dim": c["E"], "num_heads": c["H"], "memory_dim": c["E_mem"] if c["memory_dim"] == "E+dk" else None,
            "dropout": c.get("dropout", 0.0)}


def _params(c):
    E, M = c["E"], c["E_mem"]
    shapes = {"W_q": (E, E), "W_k": (E, M), "W_v": (E, M), "W_o": (E, E)}
    return {f"{w}.{p}": s if p == "weight" else (E,) for w, s in shapes.items() for p in ("weight", "bias")}


def _inputs(cfg, gen):
    """x (B, Tq, E) and memory (B, S, E_mem), standard normal."""
    B = cfg["B"]
    return [torch.randn(B, cfg["Tq"], cfg["E"], generator=gen, dtype=torch.float64),
            torch.randn(B, cfg["Tk"], cfg["E_mem"], generator=gen, dtype=torch.float64)]


HEADS = ProjectedHeads("d")


def _oracle(call, padding: bool = False):
    """torch.nn.MultiheadAttention(E, H, kdim=E_mem, vdim=E_mem, batch_first=True) in eval(), the same weights, the
    memory mask inverted, and average_attn_weights=False"""
    # The mask goes in as attn_mask, ~memory_mask spread to (B * H, Tq, S), which is what the module makes of a
    # key_padding_mask itself: its key_padding_mask path checks the mask's shape with torch._check_with, whose first
    # call imports sympy (0.37 s of every grading run, measured). `padding=True` takes that path (the kit's tests
    # compare both).
    x, memory, mask = (call["args"] + [None])[:3]
    s, H = call["state"], call["ctor"]["args"][1]
    E, M = x.shape[-1], memory.shape[-1]
    mha = torch.nn.MultiheadAttention(E, H, kdim=M, vdim=M, batch_first=True, dtype=x.dtype).eval()
    with torch.no_grad():
        if M == E:  # one packed in_proj_weight where kdim = vdim = E
            mha.in_proj_weight.copy_(torch.cat([s["W_q.weight"], s["W_k.weight"], s["W_v.weight"]]))
        else:
            for name in ("q", "k", "v"):
                getattr(mha, f"{name}_proj_weight").copy_(s[f"W_{name}.weight"])
        mha.in_proj_bias.copy_(torch.cat([s["W_q.bias"], s["W_k.bias"], s["W_v.bias"]]))
        mha.out_proj.weight.copy_(s["W_o.weight"])
        mha.out_proj.bias.copy_(s["W_o.bias"])
        B, Tq, S, d = x.shape[0], x.shape[1], memory.shape[1], E // H
        spread = None if mask is None or padding else ~mask[:, None, None, :].expand(B, H, Tq, S).reshape(B * H, Tq, S)
        out, weights = mha(x, memory, memory, attn_mask=spread, key_padding_mask=~mask if padding and mask is not None
                           else None, need_weights=True, average_attn_weights=False)
    k = (memory @ s["W_k.weight"].T + s["W_k.bias"]).view(B, S, H, d).transpose(1, 2)
    v = (memory @ s["W_v.weight"].T + s["W_v.bias"]).view(B, S, H, d).transpose(1, 2)
    return [out, weights, k, v]


PROBLEM = Problem(
    id="cross_attention",
    title="Cross-attention with a memory cache",
    summary="Encoder-decoder multi-head attention: the memory projected once into a (k, v) cache every step reuses.",
    symbol="CrossAttention",
    points={"parameters": 2, "shapes": 1, "weight_sums": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 2,
            "memory_cache": 3, "value_errors": 1, "gradients": 2, "masking": 1, "stability": 1, "side_effects": 1, "reuse": 1, "dropout": 1,
            "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "Without a cache, project the memory: k = W_k(memory), v = W_v(memory), each split into heads as (B, H, S, d) "
        "(view(B, S, H, d).transpose(1, 2)); that pair is the cache you return. With a cache, use it and never touch "
        "memory (it may be None).",
        "Per head: scores = q @ k^T / sqrt(d), d = E // H; the mask (B, S) becomes (B, 1, 1, S) so that it covers every "
        "head and query; fill the masked scores with a very negative number, softmax, multiply by the mask.",
        "context = dropout(weights) @ v is (B, H, Tq, d); output = W_o(context.transpose(1, 2).reshape(B, Tq, E)); "
        "return output, weights (per head, before dropout), (k, v).",
    ),
    class_doc="Encoder-decoder multi-head attention: queries from x, keys and values from the memory, cached.",
    methods=(
        Method(
            signature="def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):",
            statement=(
                "E = embed_dim, E_mem = memory_dim (E by default), H = num_heads, d = E // H; E % H != 0 raises\n"
                "ValueError. Exactly these parameters, each with a bias, and a dropout of probability `dropout`:\n"
                "W_q = nn.Linear(E, E), W_k = nn.Linear(E_mem, E), W_v = nn.Linear(E_mem, E), W_o = nn.Linear(E, E).\n"
                "Head n uses features n*d:(n+1)*d of a projection."
            ),
            args=(("embed_dim", "E"), ("num_heads", "H"), ("memory_dim", "E_mem, E by default"),
                  ("dropout", "probability, 0.0 by default")),
        ),
        Method(
            signature="def forward(self, x, memory=None, memory_mask=None, cache=None):",
            statement=(
                "Without a cache: k = W_k(memory), v = W_v(memory), split into heads, (B, H, S, d) each; the returned\n"
                "cache is (k, v). memory=None and cache=None raises ValueError. With a cache (k, v), memory is\n"
                "ignored (it may be None) and never projected; the returned cache is the given one.\n"
                "Per head: weights = softmax(q k^T / sqrt(d)) over the allowed memory positions (memory_mask (B, S),\n"
                "True = attend, the same for every head and query), 0 elsewhere; a row with no allowed position has\n"
                "weights 0 and context 0. context = dropout(weights) @ v; heads concatenated in order, then W_o.\n"
                "The weights are returned per head, before dropout. In eval() it equals nn.MultiheadAttention(E, H,\n"
                "kdim=E_mem, vdim=E_mem, batch_first=True) with key_padding_mask=~memory_mask; do not call it (nor\n"
                "F.scaled_dot_product_attention): the grader intercepts them."
            ),
            args=(Arg("x", "(B, Tq, E): the decoder's states (the queries)", "query"),
                  Arg("memory", "(B, S, E_mem): the encoder's states, or None with a cache", "key"),
                  Arg("memory_mask", "None, or bool (B, S); True = the position may be attended", "key_padding"),
                  Arg("cache", "None, or (k, v), each (B, H, S, d)", "cache")),
            returns=(Out("output", "(B, Tq, E)", "values"), Out("weights", "(B, H, Tq, S)", "weights"),
                     Out("k", "(B, H, S, d): W_k(memory) split into heads", "cache"),
                     Out("v", "(B, H, S, d): W_v(memory) split into heads", "cache")),
        ),
    ),
    imports="import torch\nfrom torch import nn\n",
    ctor=_ctor,
    ctor_required=2,
    variants=({"memory_dim": "default"}, {"memory_dim": "E+dk"}),
    fit=_fit,
    params=_params,
    inputs=_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": HEADS.amplify, "split": HEADS.split, "long": True},
        "parameters": {"errors": (({"embed_dim": 6, "num_heads": 4}, "embed_dim not divisible by num_heads", ()),)},
        "oracle": {"call": _oracle},
        "value_errors": {"calls": lambda cfg: (({"memory": None}, "memory=None without a cache", ()),)},
    },
    negative=HEADS.negative,
    mistakes=MISTAKES,
    banned=BANNED,
    track="seq2seq",
    after=("attentional_decoder",),
)
