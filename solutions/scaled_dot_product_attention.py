"""Reference: scaled dot-product attention with a boolean mask (True = attend)."""
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    """queries (..., Tq, d), keys (..., Tk, d), values (..., Tk, dv) -> output (..., Tq, dv), weights (..., Tq, Tk)."""
    d = queries.shape[-1]
    scores = queries @ keys.transpose(-2, -1) / d**0.5  # (..., Tq, Tk)
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        # A finite fill keeps rows with no allowed key free of NaN; `* mask` zeroes them (and masked keys).
        filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = torch.softmax(filled, dim=-1) * mask
    return weights @ values, weights
