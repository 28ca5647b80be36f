"""Spec: Luong's local attention (local-m and local-p), section 14 of the seq2seq stage."""
import torch

from ..errors import SpecError
from ..model.roles import Arg
from ..model.spec import SCORE_BOUND, Method, Mistake, Problem
from ._common import FORWARD_ARGS, OUTPUT_AND_WEIGHTS, qkv_inputs

MODES = ("local-m", "local-p")
VARIANTS = ({"mode": "local-m", "D": 2}, {"mode": "local-p", "D": 1}, {"mode": "local-p", "D": 3})


def _fit(cfg, variant):
    """The variant's mode and D; the second local-p variant (D = 3) with align_dim = 1, a W_p to one unit: valid, and
    code that refuses it is wrong."""
    return {**cfg, **variant, **({"h": 1} if variant["mode"] == "local-p" and variant["D"] == 3 else {})}


def _ctor(c):
    """local-p with its align_dim; local-m given one too (which it must ignore: no W_p, no v_p), except on the decoding
    step (Tq = 1), which leaves it out."""
    return {"query_dim": c["dq"], "key_dim": c["dk"], "window": c["D"], "mode": c["mode"],
            "align_dim": c["h"] if c["mode"] == "local-p" or c["Tq"] > 1 else None}


def _params(c):
    out = {"W_a.weight": (c["dq"], c["dk"])}
    if c["mode"] == "local-p":
        out.update({"W_p.weight": (c["h"], c["dq"]), "v_p.weight": (1, c["h"])})
    return out


def _geometry(call, cfg):
    """(valid, s - p_t) of a call, in float64, (B, Tq, Tk): the keys within each row's valid length, and each key's
    distance from the aligned position, computed from the call's own inputs and weights."""
    args, state = call["args"], call["state"]
    q = args[0].to(torch.float64)
    B, Tq, Tk = q.shape[0], q.shape[1], args[1].shape[1]
    L = _lens(call, B, Tq, Tk)[..., None]
    s = torch.arange(Tk, dtype=torch.float64)
    if cfg["mode"] == "local-m":
        p = torch.arange(Tq, dtype=torch.float64)[None, :, None]
    else:
        w_p, v_p = state["W_p.weight"].to(torch.float64), state["v_p.weight"].to(torch.float64)
        p = (L - 1) * torch.sigmoid(torch.tanh(q @ w_p.T) @ v_p.T)
    return (s < L).expand(B, Tq, Tk), (s - p).expand(B, Tq, Tk)


def distances(call, cfg):
    """(allowed, s - p_t) of a call: which keys each query may attend, (B, Tq, Tk), and each key's distance from p_t."""
    valid, dist = _geometry(call, cfg)
    return valid & (dist.abs() <= cfg["D"]), dist


EDGE_MARGIN = 1e-4
"""No drawn key lies within this of the window's edge, |s - p_t| = D (the contract promises 1e-6; this leaves room for a
float32 p_t, whose rounding reaches about 1e-6 for L = 10)."""


def _settle(call, cfg):
    """local-p: v_p scaled by 1.01, 1.02, ... until no valid key is within EDGE_MARGIN of the window's edge (p_t moves
    with v_p; local-m's p_t = t is an integer, its edges exact). A call that is not a forward of the contract's shapes
    (a constructor's error) is left as drawn."""
    args, state = call.get("args") or [], call.get("state") or {}
    if cfg.get("mode") != "local-p" or "v_p.weight" not in state or len(args) < 3 \
            or not all(isinstance(a, torch.Tensor) and a.dim() == 3 for a in args[:3]):
        return
    v = state["v_p.weight"]
    for step in range(1, 200):
        valid, dist = _geometry(call, cfg)
        if not (valid & ((dist.abs() - cfg["D"]).abs() < EDGE_MARGIN)).any():
            return
        call["state"] = state = {**state, "v_p.weight": v * (1 + 0.01 * step)}  # this call's own weights
    raise SpecError("local_attention: no v_p keeps the drawn keys off the window's edges")


def _lens(call, B, Tq, Tk):
    """The call's valid lengths as (B, Tq) float64 (Tk where valid_lens is None)."""
    lens = call["args"][3] if len(call["args"]) > 3 else None
    if lens is None:
        return torch.full((B, Tq), float(Tk), dtype=torch.float64)
    return (lens[:, None].expand(B, Tq) if lens.dim() == 1 else lens).to(torch.float64)


def allowed(call, cfg):
    return distances(call, cfg)[0]


def factor(call, cfg):
    """What multiplies the window's softmax: 1 (local-m), the Gaussian exp(-(s - p_t)^2 / (2 (D/2)^2)) (local-p)."""
    dist = distances(call, cfg)[1]
    if cfg["mode"] == "local-m":
        return torch.ones_like(dist)
    return torch.exp(-dist**2 / (2 * (cfg["D"] / 2) ** 2))


def _amplify(args, state, cfg):
    """Scale W_a so that the largest |score| is exactly 1e4 (p_t does not depend on W_a)."""
    q, k, w = args[0], args[1], state["W_a.weight"]
    scores = q @ (k @ w.T).transpose(1, 2)
    w.mul_(SCORE_BOUND / scores.abs().max())


MISTAKES = (
    Mistake("sigma_is_window", "local-p: the Gaussian's sigma is D instead of D / 2",
            (("sigma = self.window / 2", "sigma = self.window"),),
            explain="Luong et al. set sigma = D / 2: the Gaussian falls to exp(-2) at the window's edges. With "
                    "sigma = D it barely falls off, and local-p weighs the far keys too much.",
            hint="sigma = window / 2; weights = a * exp(-(s - p_t)^2 / (2 * sigma^2))."),
    Mistake("gaussian_renormalised", "local-p: the weights renormalised after the Gaussian",
            (("            weights = weights * torch.exp(-dist**2 / (2 * sigma**2))",
              "            weights = weights * torch.exp(-dist**2 / (2 * sigma**2))\n"
              "            weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-300)"),),
            explain="The contract takes the softmax over the window first, then multiplies by the Gaussian, and does "
                    "not renormalise: local-p rows sum to less than 1.",
            hint="weights = softmax over the window * Gaussian; do not divide by the row's sum afterwards."),
    Mistake("aligned_by_tk", "local-p: p_t scaled by Tk - 1, not by the row's valid length L - 1",
            (("p = (L - 1) * torch.sigmoid(", "p = (Tk - 1) * torch.sigmoid("),),
            explain="p_t = (L - 1) * sigmoid(v_p . tanh(W_p h_t)) with L the row's valid length: the aligned position "
                    "lies among the valid keys, not among the padded ones.",
            hint="Take L from valid_lens (Tk where it is None) and use (L - 1) * sigmoid(...)."),
    Mistake("gaussian_on_scores", "local-p: the Gaussian multiplies the scores before the softmax",
            (("        filled = scores.masked_fill(",
              "        if self.mode == \"local-p\":\n"
              "            scores = scores * torch.exp(-dist**2 / (2 * (self.window / 2) ** 2))\n"
              "        filled = scores.masked_fill("),
             ("            weights = weights * torch.exp(-dist**2 / (2 * sigma**2))", "            pass")),
            explain="The Gaussian weighs the attention weights, after the softmax over the window: a_t(s) * "
                    "exp(-(s - p_t)^2 / (2 sigma^2)). Scaling the scores instead only changes the softmax's "
                    "temperature per key, and the rows still sum to 1.",
            hint="weights = softmax(window scores) first; then weights = weights * Gaussian."),
    Mistake("aligned_by_length", "local-p: p_t scaled by L, not by L - 1",
            (("p = (L - 1) * torch.sigmoid(", "p = L * torch.sigmoid("),),
            explain="With 0-based positions the last valid key is L - 1, so p_t = (L - 1) * sigmoid(...) lies in "
                    "[0, L - 1]; scaled by L it drifts right, up to a position past the last key.",
            hint="p_t = (L - 1) * sigmoid(v_p . tanh(W_p h_t)), L the row's valid length."),
    Mistake("window_exclusive", "the window excludes its edges: |s - p_t| < D instead of <= D",
            (("(dist.detach().abs() <= self.window)", "(dist.detach().abs() < self.window)"),),
            explain="The window holds the 2D + 1 positions with |s - p_t| <= D, its edges included; with < the "
                    "keys at distance exactly D (local-m: t - D and t + D) are dropped.",
            hint="allowed = (s < L) & ((s - p_t).abs() <= D)."),
    Mistake("local_m_clipped", "local-m: p_t clipped to the last valid key",
            (("p = torch.arange(Tq, device=scores.device, dtype=scores.dtype)[:, None]",
              "p = torch.minimum(torch.arange(Tq, device=scores.device, dtype=scores.dtype)[:, None], L - 1)"),),
            explain="local-m aligns target t with source t and does not clip: a query past the source's end "
                    "(t - D >= L) has no key in its window, so its weights and output are 0.",
            hint="local-m: p_t = t, whatever L is; rows whose window holds no valid key stay 0."),
    Mistake("length_ignored", "the window ignores valid_lens (keys past the row's length allowed)",
            (("allowed = (s < L) & (", "allowed = ("),),
            explain="A key at s >= L is padding: it is allowed only when s < L and |s - p_t| <= D. Without s < L "
                    "the window reaches into the padding.",
            hint="allowed = (s < L) & ((s - p_t).abs() <= D), with L from valid_lens."),
    Mistake("softmax_before_window", "the softmax taken over all the row's valid keys, then cut to the window",
            (("weights = torch.softmax(filled, dim=-1) * allowed",
              "weights = torch.softmax(scores.masked_fill(~(s < L), torch.finfo(scores.dtype).min), dim=-1) * allowed"),),
            explain="a is the softmax over the window's keys only: the valid keys outside the window take no share "
                    "of it. A masked softmax over the whole row, cut to the window afterwards, leaves the window's "
                    "weights with only part of the mass.",
            hint="Fill the scores outside the window with a very negative number first, then take the softmax."),
    Mistake("nan_empty_rows", "rows with no allowed key give NaN (a -inf fill)",
            (("filled = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)",
              "filled = scores.masked_fill(~allowed, float(\"-inf\"))"),),
            explain="A row whose window holds no valid key (L = 0, or local-m with t - D >= L) is all -inf after a "
                    "-inf fill, and its softmax is NaN; the contract gives such a row weights 0 and output 0.",
            hint="Fill with torch.finfo(scores.dtype).min (a finite number), take the softmax, then multiply by the "
                 "window mask so that empty rows are exactly 0."),
    Mistake("unknown_mode_accepted", "an unknown mode is not rejected", (("if mode not in modes:", "if False:"),),
            explain="An unknown mode was accepted silently (and then behaved like one of the two).",
            hint="Validate mode first and raise ValueError naming the valid choices (local-m, local-p)."),
    Mistake("positions_float64", "key positions created as float64 whatever the inputs' dtype",
            (("s = torch.arange(Tk, device=scores.device, dtype=scores.dtype)",
              "s = torch.arange(Tk, device=scores.device, dtype=torch.float64)"),),
            explain="s - p_t with s in float64 promotes the distances, the Gaussian and the weights to float64: a "
                    "float32 call returns float64 weights.",
            hint="torch.arange(Tk, device=scores.device, dtype=scores.dtype)."),
    Mistake("sum_over_queries", "the output sums the weighted values over the queries, not over the keys",
            (("return torch.bmm(weights, values), weights",
              "return (weights[..., None] * values[:, None]).sum(1), weights"),),
            explain="output[b, t] = sum over s of weights[b, t, s] * values[b, s]: the sum runs over the key axis "
                    "(axis 2 of weights[..., None] * values[:, None]), which leaves one row per query.",
            hint="output = weights @ values (torch.bmm), (B, Tq, Tk) @ (B, Tk, dv) -> (B, Tq, dv)."),
)

STATEMENT = (
    "D = window (an int >= 1). Aligned position p_t (a real number; t is the query's index):\n"
    "  local-m: p_t = t (not clipped)\n"
    "  local-p: p_t = (L - 1) * sigmoid(v_p . tanh(W_p h_t)), L = the row's valid length (Tk when valid_lens is None)\n"
    "Key s is allowed when s < L and |s - p_t| <= D.\n"
    "scores[b, t, s] = h_t . (W_a k_s); a = softmax of the scores over the allowed keys, 0 elsewhere.\n"
    "local-m: weights = a. local-p: weights = a * exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D / 2 (not renormalised).\n"
    "output = weights @ values. A row with no allowed key has weights 0 and output 0."
)

PROBLEM = Problem(
    id="local_attention",
    title="Local attention",
    summary="Luong's local attention: a window of 2D+1 keys around a monotonic (local-m) or predicted (local-p) position.",
    symbol="LocalAttention",
    points={
        "parameters": 2, "shapes": 1, "window_weights": 2, "parity_float64": 4, "parity_float32": 1, "gradients": 2,
        "stability": 1, "side_effects": 1, "cuda": 1,
    },
    hints=(
        "Validate mode and window in __init__; W_a = nn.Linear(key_dim, query_dim, bias=False) in both modes, "
        "W_p and v_p only in local-p (which needs align_dim).",
        "Compute everything as (B, Tq, Tk) tensors: L from valid_lens, s = arange(Tk), p_t per query, then "
        "allowed = (s < L) & ((s - p_t).abs() <= D).",
        "Fill the scores outside the window with a very negative number, softmax, multiply by allowed; for local-p "
        "then multiply by exp(-(s - p_t)^2 / (2 (D/2)^2)).",
    ),
    class_doc="Luong's local attention with the general score.",
    methods=(
        Method(
            signature='def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):',
            statement=(
                "Parameters, no biases: W_a = nn.Linear(key_dim, query_dim) (both modes); local-p only: "
                "W_p = nn.Linear(query_dim, align_dim), v_p = nn.Linear(align_dim, 1).\n"
                "window not an int >= 1, an unknown mode (naming local-m and local-p), or local-p with "
                "align_dim=None raise ValueError; local-m ignores align_dim."
            ),
            args=(
                ("query_dim", "dq"), ("key_dim", "dk"), ("window", "D, an int >= 1"),
                ("mode", "local-m or local-p"), ("align_dim", "size of W_p's output (local-p only)"),
            ),
        ),
        Method(
            signature="def forward(self, queries, keys, values, valid_lens=None):",
            statement=STATEMENT,
            args=(Arg("queries", "(B, Tq, dq): the decoder states h_t", "query"),) + FORWARD_ARGS[1:],
            returns=OUTPUT_AND_WEIGHTS,
        ),
    ),
    imports="import torch\nfrom torch import nn\n",
    ctor=_ctor,
    ctor_required=3,
    variants=VARIANTS,
    fit=_fit,
    params=_params,
    inputs=qkv_inputs,
    options={
        "stability": {"amplify": _amplify},
        "window_weights": {"allowed": allowed, "factor": factor},
        "parameters": {"errors": (
            ({"query_dim": 4, "key_dim": 6, "window": 0, "mode": "local-m"}, "window=0", ()),
            ({"query_dim": 4, "key_dim": 6, "window": True, "mode": "local-m"}, "a bool window", ()),
            ({"query_dim": 4, "key_dim": 6, "window": 2.0, "mode": "local-m"}, "a float window", ()),
            ({"query_dim": 4, "key_dim": 6, "window": 2, "mode": "local-p", "align_dim": None}, "local-p with align_dim=None", ()),
            ({"query_dim": 4, "key_dim": 6, "window": 2, "mode": "local-p", "align_dim": True}, "a bool align_dim", ()),
            ({"query_dim": 4, "key_dim": 6, "window": 2, "mode": "local-p", "align_dim": 2.5}, "a float align_dim", ()),
            ({"query_dim": 4, "key_dim": 6, "window": 2, "mode": "local"}, "an unknown mode", MODES),
        )},
    },
    mistakes=MISTAKES,
    track="seq2seq",
    after=("luong_attention",),
    settle=_settle,
)
