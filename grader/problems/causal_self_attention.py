"""Spec: the attention of a LLaMA-style decoder: RoPE, grouped-query heads and a KV cache (the capstone)."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import SCORE_BOUND, Method, Mistake, Problem
from ._common import LLM_BANNED

ROPE_Q = "q = apply_rope(q, positions, base=self.rope_base)"
ROPE_K = "k = apply_rope(k, positions, base=self.rope_base)  # cached keys are stored rotated"
POSITIONS = "positions = torch.arange(P, P + T, device=x.device)  # the new tokens' positions"
ALLOWED = "allowed = torch.ones(T, P + T, dtype=torch.bool, device=x.device).tril(P)  # new token t sees 0..P+t"
SCORES = "scores = q @ keys.transpose(-2, -1) / self.d ** 0.5  # (B, H, T, P+T)"
KEYS = "keys = k.repeat_interleave(G, dim=1)  # query head n reads key/value head n // G"
VALUES = "values = v.repeat_interleave(G, dim=1)"
W_K = "self.W_k = nn.Linear(embed_dim, num_kv_heads * self.d, bias=False)"
W_V = "self.W_v = nn.Linear(embed_dim, num_kv_heads * self.d, bias=False)"
RETURN = "return self.W_o(context.transpose(1, 2).reshape(B, T, E)), (k, v)"

MISTAKES = (
    Mistake("causal_top_left", "causal mask aligned to the top left: with a cache, new tokens miss earlier ones",
            ((ALLOWED, "allowed = torch.ones(T, P + T, dtype=torch.bool, device=x.device).tril(0)"),),
            explain="New token t sits at position P + t and sees every cached token and the new ones up to itself: "
                    "key j is allowed when j <= P + t (bottom right). tril(0) ignores the P cached tokens.",
            hint="torch.ones(T, P + T, dtype=torch.bool).tril(P)."),
    Mistake("positions_not_offset", "new tokens rotated from position 0 instead of P (the cache length)",
            ((POSITIONS, "positions = torch.arange(T, device=x.device)"),),
            explain="With P cached tokens the new ones are at positions P..P+T-1: rotating them from 0 makes a "
                    "decoded token look like the first of the sequence.",
            hint="positions = torch.arange(P, P + T), P = cache[0].shape[-2] (0 without a cache)."),
    Mistake("unrotated_cache", "keys cached before RoPE (and the whole cache rotated at every call)",
            ((ROPE_K, "pass"),
             (KEYS, "keys = apply_rope(k, torch.arange(P + T, device=x.device), base=self.rope_base)"
                    ".repeat_interleave(G, dim=1)")),
            explain="The contract's cache holds rotated keys: a key is rotated once, at its own position, when it is "
                    "computed. Caching un-rotated keys gives a cache other decoders cannot use and re-rotates all P+T "
                    "keys at every step.",
            hint="Rotate k for the new positions before concatenating it to the cache."),
    Mistake("cache_keys_unrotated", "the new keys returned in the cache before RoPE (the attention itself uses them "
            "rotated)",
            ((ROPE_K, "k_raw, k = k, apply_rope(k, positions, base=self.rope_base)"),
             (RETURN, RETURN.replace("(k, v)", "(k_raw if cache is None else torch.cat((cache[0], k_raw), dim=-2), v)"))),
            explain="The contract's cache holds rotated keys: a later call uses the cached keys as they are and rotates "
                    "only its new tokens. Keys cached before RoPE (Mistral's reference code keeps them so) are scored "
                    "unrotated at every later step.",
            hint="Return the rotated keys: k = apply_rope(k_new, positions); cache = (cat(past_k, k), cat(past_v, v))."),
    Mistake('cache_order', 'new keys and values concatenated in front of the cache instead of after it',
            (('k = torch.cat((cache[0], k), dim=-2)', 'k = torch.cat((k, cache[0]), dim=-2)'), ('v = torch.cat((cache[1], v), dim=-2)', 'v = torch.cat((v, cache[1]), dim=-2)')),
            explain="The cache holds positions 0..P-1 and the new tokens are P..P+T-1: they go after it. Put first, every key sits at the wrong position, so the causal mask (bottom right) and the next call's cache are wrong.",
            hint='k = torch.cat((past_k, k), dim=-2); v = torch.cat((past_v, v), dim=-2).'),
    Mistake("values_rotated", "RoPE applied to the values too",
            ((ROPE_K, ROPE_K + "\n        v = apply_rope(v, positions, base=self.rope_base)"),),
            explain="RoPE encodes positions in the scores q . k; the values carry content and are never rotated.",
            hint="Rotate queries and keys only."),
    Mistake("interleaved_rope", "RoPE with interleaved pairs instead of rotate-half",
            ((ROPE_Q, "q = apply_rope(q, positions, base=self.rope_base, interleaved=True)"),
             (ROPE_K, "k = apply_rope(k, positions, base=self.rope_base, interleaved=True)")),
            explain="This module uses rotate-half pairs (i, i + d/2), as Hugging Face's LLaMA does (interleaved=False).",
            hint="apply_rope(..., interleaved=False), the default."),
    Mistake("head_mod_mapping", "key/value heads tiled with repeat (head n -> n % Hkv)",
            ((KEYS, "keys = k.repeat(1, G, 1, 1)"), (VALUES, "values = v.repeat(1, G, 1, 1)")),
            explain="Query head n uses key/value head n // G (consecutive groups): repeat_interleave, not repeat.",
            hint="k.repeat_interleave(G, dim=1)."),
    Mistake("wk_sized_E", "W_k and W_v sized E instead of Hkv * d",
            ((W_K, "self.W_k = nn.Linear(embed_dim, embed_dim, bias=False)"),
             (W_V, "self.W_v = nn.Linear(embed_dim, embed_dim, bias=False)")),
            explain="With grouped-query heads the keys and values have Hkv heads of d features: W_k and W_v map E to "
                    "Hkv * d, which is the point (a KV cache G times smaller).",
            hint="nn.Linear(E, num_kv_heads * d, bias=False)."),
    Mistake("scale_by_sqrt_E", "scores scaled by 1/sqrt(E) instead of 1/sqrt(d)",
            ((SCORES, "scores = q @ keys.transpose(-2, -1) / (self.H * self.d) ** 0.5"),),
            explain="Each head's scores are dot products of d features: the scale is 1/sqrt(d), d = E // H.",
            hint="/ math.sqrt(d), d the head size."),
    Mistake("no_causal_mask", "no causal mask: new tokens attend to later new tokens",
            (("scores = scores.masked_fill(~allowed, float(\"-inf\"))", "scores = scores"),),
            explain="A decoder's token may not see the future: with T new tokens, token t sees the cache and new "
                    "tokens 0..t only. Without the mask, one call on a sequence differs from decoding it token by token.",
            hint="Mask key j when j > P + t."),
    Mistake("cache_float32", "the returned cache cast to float32",
            ((RETURN, "return self.W_o(context.transpose(1, 2).reshape(B, T, E)), (k.float(), v.float())"),),
            explain="The cache holds the keys and values in the inputs' dtype: a float64 model keeps a float64 cache.",
            hint="Return (k, v) as computed."),
    Mistake("cache_modified_in_place", "the given cache grown in place (Tensor.set_) instead of returning new tensors",
            (("k = torch.cat((cache[0], k), dim=-2)  # (B, Hkv, P+T, d): a new tensor, the given cache untouched",
              "k = cache[0].set_(torch.cat((cache[0], k), dim=-2))"),
             ("v = torch.cat((cache[1], v), dim=-2)", "v = cache[1].set_(torch.cat((cache[1], v), dim=-2))")),
            explain="The caller still holds the cache it passed: growing those tensors in place changes the caller's "
                    "state under it (a beam search or a retry reuses the old cache). The contract returns new tensors "
                    "and never modifies the given cache.",
            hint="k = torch.cat((cache[0], k_new), dim=-2): a new tensor; return it."),
    Mistake("kv_heads_not_checked", "num_heads not divisible by num_kv_heads accepted",
            (("if num_kv_heads < 1 or num_heads % num_kv_heads:", "if num_kv_heads < 1:"),),
            explain="Query heads are grouped evenly over the key/value heads: num_heads % num_kv_heads must be 0.",
            hint="if num_kv_heads < 1 or num_heads % num_kv_heads: raise ValueError(...)."),
)


def _fit(cfg, variant):
    H = variant["Hkv"] * variant["G"]
    d = 2 * max(2, cfg["dq"] // 2)
    P = cfg["Tk"] if variant["cache"] else 0
    return {**cfg, **variant, "H": H, "d": d, "E": H * d, "T": cfg["Tq"], "P": P, "S": P + cfg["Tq"]}


def _ctor(c):
    return {"embed_dim": c["E"], "num_heads": c["H"], "num_kv_heads": None if c["G"] == 1 else c["Hkv"],
            "rope_base": c["base"]}


def _params(c):
    E, kv = c["E"], c["Hkv"] * c["d"]
    return {"W_q.weight": (E, E), "W_k.weight": (kv, E), "W_v.weight": (kv, E), "W_o.weight": (E, E)}


def _inputs(cfg, gen):
    """x (B, T, E); cache None (P = 0) or (k, v), each (B, Hkv, P, d), standard normal."""
    x = torch.randn(cfg["B"], cfg["T"], cfg["E"], generator=gen, dtype=torch.float64)
    if cfg["P"] == 0:
        return [x, None]
    shape = (cfg["B"], cfg["Hkv"], cfg["P"], cfg["d"])
    return [x, (torch.randn(*shape, generator=gen, dtype=torch.float64), torch.randn(*shape, generator=gen, dtype=torch.float64))]


def _amplify(args, state, cfg):
    """Scale W_q, W_k and the cached keys so that every |q . k| / sqrt(d) is at most 1e4 (RoPE keeps norms:
    |score| <= |q| |k| / sqrt(d)), the largest within a few times of it."""
    x, cache = args
    d, H, Hkv = cfg["d"], cfg["H"], cfg["Hkv"]
    q = (x @ state["W_q.weight"].T).unflatten(-1, (H, d)).norm(dim=-1).max()
    k = (x @ state["W_k.weight"].T).unflatten(-1, (Hkv, d)).norm(dim=-1).max()
    if cache is not None:
        k = torch.maximum(k, cache[0].norm(dim=-1).max())
    root = (SCORE_BOUND / (q * k / d ** 0.5)) ** 0.5
    state["W_q.weight"].mul_(root)
    state["W_k.weight"].mul_(root)
    if cache is not None:
        cache[0].mul_(root)


PROBLEM = Problem(
    id="causal_self_attention",
    title="Causal self-attention with RoPE, GQA and a KV cache",
    summary="A LLaMA-style decoder's attention: RoPE, grouped-query heads, a KV cache; decoding in steps equals one call.",
    symbol="CausalSelfAttention",
    points={"parameters": 1, "shapes": 1, "parity_float64": 3, "parity_float32": 1, "kv_cache": 3, "gradients": 2,
            "stability": 1, "side_effects": 1, "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "New tokens sit at positions P..P+T-1, P the cache length (0 without a cache). Rotate q and k with apply_rope "
        "(interleaved=False), then append the new k and v to the cache and return it; never modify the given cache.",
        "Query head n uses key/value head n // G: k.repeat_interleave(G, dim=1) is allowed here. New token t sees key "
        "j <= P + t: torch.ones(T, P+T).tril(P). Scale by 1/sqrt(d), d = E // H.",
        "q = rope(W_q(x) as (B, H, T, d)); k = rope(W_k(x) as (B, Hkv, T, d)); k, v = cat(cache, new); scores = q @ "
        "repeat_interleave(k)^T / sqrt(d), masked by tril(P); output = W_o(heads of softmax(scores) @ v, concatenated).",
    ),
    class_doc="The attention of a LLaMA-style decoder: RoPE, grouped-query heads (Hkv key/value heads) and a KV cache.",
    methods=(
        Method(
            signature="def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):",
            statement=(
                "E = embed_dim, H = num_heads, Hkv = num_kv_heads (H by default), d = E // H. E % H != 0,\n"
                "num_kv_heads < 1, H % Hkv != 0 or an odd d raise ValueError. Exactly these parameters, no biases:\n"
                "W_q = nn.Linear(E, E), W_k = nn.Linear(E, Hkv*d), W_v = nn.Linear(E, Hkv*d), W_o = nn.Linear(E, E).\n"
                "Head n uses features n*d:(n+1)*d of a projection. Any buffer you register is persistent=False."
            ),
            args=(("embed_dim", "E"), ("num_heads", "H"), ("num_kv_heads", "Hkv, H by default"),
                  ("rope_base", "RoPE's base, 10000.0 by default")),
        ),
        Method(
            signature="def forward(self, x, cache=None):",
            statement=(
                "x (B, T, E) holds T new tokens; cache is None (P = 0) or (k, v), each (B, Hkv, P, d): the rotated keys\n"
                "and the values of the P earlier tokens. The new tokens sit at positions P..P+T-1; their queries and\n"
                "keys are rotated as apply_rope(..., interleaved=False, base=rope_base); new token t attends to every\n"
                "earlier token and to new tokens up to itself; query head n uses key/value head n // (H // Hkv); heads\n"
                "are concatenated in order, then W_o: output (B, T, E). The returned cache is (cat(k_past, k_new),\n"
                "cat(v_past, v_new)), each (B, Hkv, P+T, d); the given cache is never modified. Splitting a sequence\n"
                "into a prefill and later calls gives the same outputs and final cache as one call."
            ),
            args=(Arg("x", "(B, T, E)", "tensor"), Arg("cache", "None, or (k, v), each (B, Hkv, P, d)", "cache")),
            returns=(Out("output", "(B, T, E)", "values"), Out("k", "(B, Hkv, S, d), S = P + T: the keys, rotated", "cache"),
                     Out("v", "(B, Hkv, S, d): the values", "cache")),
        ),
    ),
    imports="import torch\nfrom torch import nn\n\nfrom .rope import apply_rope\n",
    requires=("rope",),
    ctor=_ctor,
    ctor_required=2,
    variants=({"Hkv": 2, "G": 2, "cache": True, "base": 10000.0}, {"Hkv": 1, "G": 3, "cache": False, "base": 10000.0},
              {"Hkv": 2, "G": 1, "cache": True, "base": 500.0}),
    fit=_fit,
    params=_params,
    inputs=_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": _amplify, "long": True},
        "parity_float64": {"far": True},  # positions past 8192: a table of max_position_embeddings fails
        "parameters": {"errors": (
        ({"embed_dim": 10, "num_heads": 3}, "embed_dim not divisible by num_heads", ()),
        ({"embed_dim": 8, "num_heads": 2, "num_kv_heads": 0}, "num_kv_heads < 1", ()),
        ({"embed_dim": 12, "num_heads": 3, "num_kv_heads": 2}, "num_heads not divisible by num_kv_heads", ()),
        ({"embed_dim": 6, "num_heads": 2}, "an odd head size d = 3", ()),
    )},
    },
    mistakes=MISTAKES,
    banned=LLM_BANNED,
    track="LLM",
    after=("grouped_query_attention",),
)
