"""BUG: an additive -inf bias cleaned with nan_to_num: NaN gradients where a row has no allowed key
STYLE: additive bias
"""
"""ALiBi attention with one additive attention bias, as xformers' attn_bias / Hugging Face's
4-D float masks do: bias = alibi + (0 where allowed, -inf where not), added to the scores.

Rows with no allowed key are all -inf, so softmax gives NaN there; nan_to_num cleans the
forward, and the forward values are right.

BUG: the backward of softmax on such a row is NaN and the addition passes it straight to the
scores, so gradients to queries and keys are NaN whenever some row has no allowed key (a mask row
of all False, or causal with Tq > Tk).
"""
import math

import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads <= 0:
        raise ValueError("num_heads must be a positive int")

    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(num_heads).is_integer():
        return torch.tensor(get_slopes_power_of_2(num_heads), dtype=torch.float64)
    closest = 2 ** math.floor(math.log2(num_heads))
    return torch.tensor(get_slopes_power_of_2(closest)
                        + get_slopes_power_of_2(2 * closest)[0::2][:num_heads - closest], dtype=torch.float64)


def _attn_bias(slopes, Tq, Tk, is_causal, mask, dtype, device):
    pos = torch.arange(Tk - Tq, Tk, device=device)
    rel = pos.view(-1, 1) - torch.arange(Tk, device=device).view(1, -1)
    bias = -slopes.view(-1, 1, 1) * (rel if is_causal else rel.abs())
    allowed = (rel >= 0) if is_causal else torch.ones(Tq, Tk, dtype=torch.bool, device=device)
    if mask is not None:
        allowed = allowed & mask
    neg = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, float("-inf"))
    return bias + neg


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    sl = alibi_slopes(H) if slopes is None else slopes
    sl = sl.to(dtype=queries.dtype, device=queries.device)
    attn_bias = _attn_bias(sl, Tq, Tk, is_causal, mask, queries.dtype, queries.device)
    scores = torch.einsum("bhid,bhjd->bhij", queries, keys) / math.sqrt(d) + attn_bias
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return torch.einsum("bhij,bhjd->bhid", weights, values), weights
