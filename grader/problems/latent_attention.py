"""Spec: multi-head latent attention (DeepSeek-V2) with a latent cache and an absorbed mode, section 19 of the serving
stage."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import SCORE_BOUND, Method, Mistake, Problem
from ._common import LLM_BANNED

POSITIONS = "positions = torch.arange(P, P + T, device=x.device)"
Q_SPLIT = "q_nope, q_rope = q[..., :dn], apply_rope(q[..., dn:], positions, base=self.rope_base)"
LATENT = "c_new, k_raw = latent[..., :r], latent[..., r:]"
K_NEW = "k_new = apply_rope(k_raw, positions, base=self.rope_base)  # rotated once, at its own position"
SPLIT = "w_k, w_v = w[:, :dn], w[:, dn:]  # (H, dn, r), (H, dv, r)"
SCALE = "scores = (nope_scores + rope_scores) / (dn + dr) ** 0.5  # (B, H, T, S)"
ALLOWED = "allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(P)  # new token t sees 0 .. P + t"
ABSORBED = "nope_scores = (q_latent.reshape(B, H * T, r) @ c_kv.transpose(1, 2)).view(B, H, T, S)"
RETURN = "return self.W_o(heads.transpose(1, 2).reshape(B, T, H * dv)), (c_kv, k_rope)"
C_KV = "c_kv = c_new if cache is None else torch.cat((cache[0], c_new), dim=1)  # (B, S, r), S = P + T"
K_ROPE = "k_rope = k_new if cache is None else torch.cat((cache[1], k_new), dim=1)  # (B, S, dr)"

MISTAKES = (
    Mistake("cache_unrotated", "k_rope cached before RoPE",
            ((RETURN, RETURN.replace("(c_kv, k_rope)", "(c_kv, k_raw if cache is None else torch.cat((cache[1], k_raw), "
                                                       "dim=1))")),),
            explain="The cache holds each token's shared key already rotated at its own position (as section 13's "
                    "cache does): a later call rotates only its new tokens and uses the cached ones as they are.",
            hint="Rotate the new k_rope with apply_rope at positions P..P+T-1, then concatenate it to the cache."),
    Mistake("rope_part_first", "each head's query taken as [q_rope ; q_nope] instead of [q_nope ; q_rope]",
            ((Q_SPLIT, "q_nope, q_rope = q[..., dr:], apply_rope(q[..., :dr], positions, base=self.rope_base)"),),
            explain="Head n's query is W_q's features n*(dn+dr) .. (n+1)*(dn+dr): its first dn are q_nope, its last dr "
                    "q_rope (DeepSeek-V2's layout).",
            hint="q = W_q(x).view(B, T, H, dn + dr); q_nope = q[..., :dn]; q_rope = q[..., dn:]."),
    Mistake("latent_split_swapped", "W_dkv's output taken as [k_rope ; c_kv] instead of [c_kv ; k_rope]",
            ((LATENT, "c_new, k_raw = latent[..., dr:], latent[..., :dr]"),),
            explain="W_dkv maps x to r + dr features: the first r are the latent c_kv, the last dr the shared key k_rope.",
            hint="c_kv = latent[..., :r]; k_rope = latent[..., r:]."),
    Mistake("scale_nope_only", "scores scaled by 1/sqrt(dn) instead of 1/sqrt(dn + dr)",
            ((SCALE, SCALE.replace("(dn + dr) ** 0.5", "dn ** 0.5")),),
            explain="A head's query and key are [nope ; rope], dn + dr features: the dot product is over all of them, "
                    "and so is the scale.",
            hint="scores = (q_nope . k_nope + q_rope . k_rope) / sqrt(dn + dr)."),
    Mistake("absorb_materialises_keys", "absorb=True builds the per-head keys anyway (W_uk c_kv for every cached token)",
            ((ABSORBED, "nope_scores = q_nope @ torch.einsum(\"hnr,bsr->bhsn\", w_k, c_kv).transpose(-2, -1)"),),
            explain="The point of absorbing W_uk into the query is that decoding never decompresses the cache: "
                    "(W_uk^T q_nope) . c_kv reads r numbers per cached token, instead of building B*S*H*dn keys.",
            hint="q_latent = einsum('bhtn,hnr->bhtr', q_nope, W_uk per head); scores = q_latent @ c_kv^T."),
    Mistake("latent_copied_per_head", "absorb=True multiplies against c_kv (B, 1, S, r) broadcast over the heads, "
            "which copies the latent cache once per head",
            ((ABSORBED, "nope_scores = q_latent @ c_kv[:, None].transpose(-2, -1)"),),
            explain="torch.matmul expands a broadcast operand to the full batch shape before its batched product: "
                    "(B, H, T, r) @ (B, 1, r, S) copies c_kv H times, B*H*S*r numbers, the per-head size MLA's cache "
                    "exists to avoid. The values are right.",
            hint="Fold the heads into the query axis: (q_latent.reshape(B, H*T, r) @ c_kv.transpose(1, 2)).view(B, H, T, "
                 "S), or einsum('bhtr,bsr->bhts', ...)."),
    Mistake("cache_decompressed", "the cache holds each head's keys (W_uk c_kv) instead of the latent",
            ((RETURN, RETURN.replace("(c_kv, k_rope)", "(torch.einsum(\"hnr,bsr->bhsn\", w_k, c_kv), k_rope)")),),
            explain="MLA's cache is the latent c_kv (r numbers per token) and one shared rotated key (dr): nothing per "
                    "head. That is what makes it small.",
            hint="Return (c_kv, k_rope): (B, P+T, r) and (B, P+T, dr)."),
    Mistake("positions_not_offset", "new tokens rotated from position 0 instead of P (the cache length)",
            ((POSITIONS, "positions = torch.arange(T, device=x.device)"),),
            explain="With P cached tokens the new ones sit at P..P+T-1: rotating them from 0 makes a decoded token look "
                    "like the first of the sequence.",
            hint="positions = torch.arange(P, P + T), P = cache[0].shape[1] (0 without a cache)."),
    Mistake("causal_top_left", "causal mask aligned to the top left: with a cache, new tokens miss earlier ones",
            ((ALLOWED, ALLOWED.replace(".tril(P)", ".tril(0)")),),
            explain="New token t sits at position P + t and sees every cached token and the new ones up to itself: key "
                    "j is allowed when j <= P + t. tril(0) ignores the P cached tokens.",
            hint="torch.ones(T, P + T, dtype=torch.bool).tril(P)."),
    Mistake("interleaved_rope", "RoPE with interleaved pairs instead of rotate-half",
            ((Q_SPLIT, Q_SPLIT.replace("base=self.rope_base)", "base=self.rope_base, interleaved=True)")),
             (K_NEW, K_NEW.replace("base=self.rope_base)", "base=self.rope_base, interleaved=True)"))),
            explain="The contract rotates with apply_rope(..., interleaved=False): pairs (i, i + dr/2).",
            hint="apply_rope(..., interleaved=False), the default."),
    Mistake("cache_float32", "the returned cache cast to float32",
            ((RETURN, RETURN.replace("(c_kv, k_rope)", "(c_kv.float(), k_rope.float())")),),
            explain="The cache holds the latents and keys in the inputs' dtype: a float64 model keeps a float64 cache.",
            hint="Return (c_kv, k_rope) as computed."),
    Mistake("cache_modified_in_place", "the given cache grown in place (Tensor.set_) instead of returning new tensors",
            ((C_KV, "c_kv = c_new if cache is None else cache[0].set_(torch.cat((cache[0], c_new), dim=1))"),
             (K_ROPE, "k_rope = k_new if cache is None else cache[1].set_(torch.cat((cache[1], k_new), dim=1))")),
            explain="The caller still holds the cache it passed: growing those tensors in place changes the caller's "
                    "state under it (a beam search or a retry reuses the old cache). The contract returns new tensors.",
            hint="c_kv = torch.cat((cache[0], c_new), dim=1): a new tensor; return it."),
    Mistake("rope_dim_not_checked", "an odd head_dim_rope accepted",
            (("or head_dim_rope % 2:", ":"),),
            explain="RoPE turns pairs of features: dr must be even, and the constructor says so (ValueError) before any "
                    "call.",
            hint="if ... or head_dim_rope % 2: raise ValueError(...)."),
    Mistake("value_part_first", "W_ukv's head block taken as [v ; k_nope] instead of [k_nope ; v]",
            ((SPLIT, "w_k, w_v = w[:, dv:], w[:, :dv]"),),
            explain="W_ukv's features for head n are n*(dn+dv) .. (n+1)*(dn+dv): the first dn make k_nope, the last dv "
                    "the value.",
            hint="w = W_ukv.weight.view(H, dn + dv, r); w_k = w[:, :dn]; w_v = w[:, dn:]."),
)


def _fit(cfg, variant):
    """The variant's sizes as H, r, dn, dr, dv (named apart in the variant, so that the memory calls' own sizes win
    where the constructor reads the variant over the dims); E = 2 * dq, T = Tq new tokens after P = Tk cached ones
    (when the variant has a cache)."""
    P = cfg["Tk"] if variant["cache"] else 0
    sizes = {"H": variant["heads"], "r": variant["rank"], "dn": variant["nope"], "dr": variant["rope"],
             "dv": variant["vdim"]}
    return {**cfg, **variant, **sizes, "E": 2 * cfg["dq"], "T": cfg["Tq"], "P": P, "S": P + cfg["Tq"]}


def _ctor(c):
    return {"embed_dim": c["E"], "num_heads": c["H"], "kv_rank": c["r"], "head_dim_nope": c["dn"],
            "head_dim_rope": c["dr"], "head_dim_v": c["dv"], "rope_base": c["base"]}


def _params(c):
    E, H, r, dn, dr, dv = c["E"], c["H"], c["r"], c["dn"], c["dr"], c["dv"]
    return {"W_q.weight": (H * (dn + dr), E), "W_dkv.weight": (r + dr, E), "W_ukv.weight": (H * (dn + dv), r),
            "W_o.weight": (E, H * dv)}


def _inputs(cfg, gen):
    """x (B, T, E); cache None (P = 0) or (c_kv (B, P, r), k_rope (B, P, dr)), standard normal."""
    x = torch.randn(cfg["B"], cfg["T"], cfg["E"], generator=gen, dtype=torch.float64)
    if cfg["P"] == 0:
        return [x, None]
    B, P = cfg["B"], cfg["P"]
    return [x, (torch.randn(B, P, cfg["r"], generator=gen, dtype=torch.float64),
                torch.randn(B, P, cfg["dr"], generator=gen, dtype=torch.float64))]


def _trailing(cfg):
    return [True] if cfg["absorb"] else []


def _amplify(args, state, cfg):
    """Scale W_q, W_dkv and the cache so that every |score| stays within 1e4 (RoPE keeps norms: |score| <= |q| |k| /
    sqrt(dn + dr) with k = [W_uk c ; k_rope]), the largest within a few times of it."""
    x, cache = args[0], args[1]
    H, r, dn, dr = cfg["H"], cfg["r"], cfg["dn"], cfg["dr"]
    q = (x @ state["W_q.weight"].T).unflatten(-1, (H, dn + dr)).norm(dim=-1).max()
    latent = x @ state["W_dkv.weight"].T
    c, kr = latent[..., :r], latent[..., r:]
    if cache is not None:
        c, kr = torch.cat((cache[0], c), 1), torch.cat((cache[1], kr), 1)
    w_k = state["W_ukv.weight"].view(H, -1, r)[:, :dn]
    k_nope = torch.einsum("hnr,bsr->bhsn", w_k, c)
    k = (k_nope.square().sum(-1) + kr.square().sum(-1)[:, None]).sqrt().max()
    root = (SCORE_BOUND / (q * k / (dn + dr) ** 0.5)) ** 0.5
    state["W_q.weight"].mul_(root)
    state["W_dkv.weight"].mul_(root)
    if cache is not None:
        cache[0].mul_(root)
        cache[1].mul_(root)


def _memory_fit(cfg):
    """Decoding: T = 2 new tokens (config 0, whose B is 2) or 3 (config 3, B = 1: the contract's largest T) after
    P = 96, B = 2, H = 4, r = 8, dn = 6, dr = 4, dv = 10, E = 8; at T = 2 the cached tokens' per-head keys
    (B*S*H*dn = 4704), values (7840), c_kv or k_rope copied per head (6272, 3136) all exceed the bound (1568), each by
    a tensor of its own size (so that the measured overrun tells them apart); the backstop decodes T = 1."""
    T = 2 if cfg["B"] > 1 else 3
    return {**cfg, "B": 2, "Tq": T, "Tk": 96, "T": T, "P": 96, "S": 96 + T, "H": 4, "r": 8, "dn": 6, "dr": 4, "dv": 10,
            "dq": 4, "E": 8, "cache": True, "absorb": True}


def _memory(cfg, args):
    """absorb=True only: max(S, B*H*T*(P+T), B*T*H*max(r, dn+dr, dv)) elements, S the largest input, output or
    parameter (the given and returned caches included)."""
    B, H, T, P, r, dn, dr, dv, E = (cfg[k] for k in ("B", "H", "T", "P", "r", "dn", "dr", "dv", "E"))
    S = max(B * T * E, B * (P + T) * r, B * (P + T) * dr, *(a * b for a, b in _params(cfg).values()))
    return [({"absorb": True}, max(S, B * H * T * (P + T), B * T * H * max(r, dn + dr, dv)))]


BACKSTOP = {
    "dims": {"B": 1, "Tq": 1, "Tk": 16384, "T": 1, "P": 16384, "S": 16385, "H": 64, "r": 128, "dn": 64, "dr": 64,
             "dv": 64, "dq": 128, "E": 256, "cache": True, "absorb": True, "base": 10000.0},
    "args": {"absorb": True},
    "allowed": lambda cfg, args: cfg["S"] * cfg["r"],
    "resident_kb": 200 * 1024,
    "held_kb": 240 * 1024,
}
"""A float32 decoding step after 16384 cached tokens with 64 heads, measured from outside the worker (run/cgroup.py):
the cached tokens' per-head keys (B*S*H*dn) take 268 MB, and so do their values; the absorbed step reads the 8 MB
latent cache and builds (H, S) scores of 4 MB each (the reference's worker grows by 104 MB here, most of it the first
float32 products' own buffers)."""


PROBLEM = Problem(
    id="latent_attention",
    title="Multi-head latent attention (MLA)",
    summary="DeepSeek-V2's attention: a cache of one latent and one rotated key per token, and an absorbed decoding mode.",
    symbol="LatentAttention",
    points={"parameters": 1, "shapes": 1, "parity_float64": 3, "parity_float32": 1, "kv_cache": 3, "gradients": 2,
            "stability": 1, "side_effects": 1, "memory": 2, "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "Per token the cache keeps c_kv = the first r features of W_dkv(x) and k_rope = its last dr, rotated at the "
        "token's position (apply_rope, interleaved=False). Head n's query is W_q(x)'s features n*(dn+dr) .. : q_nope "
        "then q_rope (rotated too). Head n's key for token s is [W_uk,n c_kv(s) ; k_rope(s)], its value W_uv,n c_kv(s).",
        "W_ukv.weight viewed as (H, dn + dv, r): rows :dn of head n make its k_nope, rows dn: its value. score = "
        "(q_nope . k_nope + q_rope . k_rope) / sqrt(dn + dr); new token t sees tokens 0 .. P + t.",
        "absorb=True: q_latent = einsum('bhtn,hnr->bhtr', q_nope, w_k); nope scores = q_latent @ c_kv^T; after the "
        "softmax, mixed = weights @ c_kv (B, H, T, r), head outputs = einsum('bhtr,hvr->bhtv', mixed, w_v). Fold the "
        "heads into the query axis (reshape(B, H*T, .)) so that c_kv and k_rope are never copied per head.",
    ),
    class_doc="Multi-head latent attention (DeepSeek-V2) without query compression: a latent cache and one shared "
              "rotated key per token.",
    methods=(
        Method(
            signature="def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, "
                      "rope_base=10000.0):",
            statement=(
                "E = embed_dim, H = num_heads, r = kv_rank, dn = head_dim_nope, dr = head_dim_rope, dv = head_dim_v.\n"
                "H, r, dn, dr or dv below 1, or an odd dr, raise ValueError. Exactly these parameters, no biases:\n"
                "W_q = nn.Linear(E, H*(dn+dr)), W_dkv = nn.Linear(E, r+dr), W_ukv = nn.Linear(r, H*(dn+dv)),\n"
                "W_o = nn.Linear(H*dv, E). Head n: W_q's features n*(dn+dr):(n+1)*(dn+dr), first dn = q_nope, last\n"
                "dr = q_rope; W_dkv: first r = c_kv, last dr = k_rope (shared by all heads); W_ukv's features\n"
                "n*(dn+dv):(n+1)*(dn+dv), first dn = k_nope, last dv = v. Any buffer you register is persistent=False."
            ),
            args=(("embed_dim", "E"), ("num_heads", "H"), ("kv_rank", "r, the latent's size"),
                  ("head_dim_nope", "dn"), ("head_dim_rope", "dr (even)"), ("head_dim_v", "dv"),
                  ("rope_base", "RoPE's base, 10000.0 by default")),
        ),
        Method(
            signature="def forward(self, x, cache=None, absorb=False):",
            statement=(
                "x (B, T, E) holds T new tokens at positions P..P+T-1; cache is None (P = 0) or (c_kv (B, P, r),\n"
                "k_rope (B, P, dr)) of the earlier tokens, k_rope already rotated. q_rope and the new k_rope are rotated\n"
                "by apply_rope(..., interleaved=False, base=rope_base) at their positions. Head n: query [q_nope ;\n"
                "q_rope], key of token s [k_nope_n(s) ; k_rope(s)], scores scaled by 1/sqrt(dn + dr); new token t\n"
                "attends to every cached token and to new tokens up to itself; output_n = softmax @ v_n; output =\n"
                "W_o(heads concatenated). The returned cache is (cat(c_past, c_new), cat(k_rope_past, k_rope_new));\n"
                "the given cache is never modified. absorb=True gives the same result by folding W_ukv's key part\n"
                "into the query and its value part after the weighted sum of latents: then no tensor an operation\n"
                "allocates has more than max(S, B*H*T*(P+T), B*T*H*max(r, dn+dr, dv)) elements (S the largest\n"
                "input, output or parameter). Splitting a sequence into calls gives the same outputs and cache."
            ),
            args=(Arg("x", "(B, T, E)", "tensor"),
                  Arg("cache", "None, or (c_kv (B, P, r), k_rope (B, P, dr)), k_rope rotated", "cache"),
                  Arg("absorb", "bool: fold W_ukv into the query and the output (decoding)", "scalar")),
            returns=(Out("output", "(B, T, E)", "values"), Out("c_kv", "(B, S, r), S = P + T: the latents", "cache"),
                     Out("k_rope", "(B, S, dr): the shared keys, rotated", "cache")),
        ),
    ),
    imports="import torch\nfrom torch import nn\n\nfrom .rope import apply_rope\n",
    requires=("rope",),
    ctor=_ctor,
    ctor_required=6,
    variants=({"heads": 2, "rank": 5, "nope": 3, "rope": 4, "vdim": 3, "cache": False, "absorb": False, "base": 500.0},
              {"heads": 3, "rank": 6, "nope": 2, "rope": 4, "vdim": 2, "cache": False, "absorb": True, "base": 10000.0},
              {"heads": 1, "rank": 3, "nope": 5, "rope": 2, "vdim": 4, "cache": True, "absorb": True, "base": 500.0}),
    fit=_fit,
    params=_params,
    inputs=_inputs,
    trailing=_trailing,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": _amplify, "long": True},
        "parity_float64": {"far": True},  # positions past 8192: a table of max_position_embeddings fails
        "memory": {
            "calls": _memory,
            "fit": _memory_fit,
            "backstop": BACKSTOP,
            "words": {"bound": "max(S, B*H*T*(P+T), B*T*H*max(r, dn+dr, dv))",
                      "tensor": "the cached tokens' per-head keys or values (W_ukv applied to c_kv)",
                      "advice": "With absorb=True never apply W_ukv to the cache: fold its key part into the query "
                                "(q_nope @ W_uk per head) and its value part after the weighted sum of latents, and "
                                "fold the heads into the query axis so that c_kv and k_rope are not copied per head"},
        },
        "parameters": {"errors": (
            ({"embed_dim": 8, "num_heads": 0, "kv_rank": 4, "head_dim_nope": 4, "head_dim_rope": 2, "head_dim_v": 4},
             "num_heads < 1", ()),
            ({"embed_dim": 8, "num_heads": 2, "kv_rank": 0, "head_dim_nope": 4, "head_dim_rope": 2, "head_dim_v": 4},
             "kv_rank < 1", ()),
            ({"embed_dim": 8, "num_heads": 2, "kv_rank": 4, "head_dim_nope": 4, "head_dim_rope": 3, "head_dim_v": 4},
             "an odd head_dim_rope", ()),
            ({"embed_dim": 8, "num_heads": 2, "kv_rank": 4, "head_dim_nope": 4, "head_dim_rope": 0, "head_dim_v": 4},
             "head_dim_rope < 1", ()),
            ({"embed_dim": 8, "num_heads": 2, "kv_rank": 4, "head_dim_nope": 0, "head_dim_rope": 2, "head_dim_v": 4},
             "head_dim_nope < 1", ()),
            ({"embed_dim": 8, "num_heads": 2, "kv_rank": 4, "head_dim_nope": 4, "head_dim_rope": 2, "head_dim_v": 0},
             "head_dim_v < 1", ()),
        )},
    },
    mistakes=MISTAKES,
    banned=LLM_BANNED,
    track="serving",
    after=("rope", "causal_self_attention"),
)
