"""Reference: attention with linear biases (ALiBi, Press et al. 2022): no position embedding, a per-head penalty that
grows linearly with the distance between query and key."""
import torch


def alibi_slopes(num_heads):
    """num_heads -> slopes (num_heads,), float64: 2 ** (-8 (i + 1) / n) for n a power of two; otherwise the c slopes
    of c = the largest power of two <= n, then every other slope of 2c, the first n - c of them."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"alibi_slopes: num_heads = {num_heads!r} must be an int of at least 1")

    def geometric(n):  # n a power of two: 2^(-8/n), 2^(-16/n), ..., 2^-8
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    c = 1 << (num_heads.bit_length() - 1)  # the largest power of two <= num_heads
    slopes = geometric(c) + geometric(2 * c)[0::2][:num_heads - c]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    """queries (B, H, Tq, d), keys (B, H, Tk, d), values (B, H, Tk, dv) -> output (B, H, Tq, dv), weights
    (B, H, Tq, Tk). scores = q k^T / sqrt(d) - slopes[n] * |pos(i) - j|, pos(i) = i + Tk - Tq; allowed keys: j <= pos(i)
    when is_causal, and the mask."""
    H, Tq, d = queries.shape[-3], queries.shape[-2], queries.shape[-1]
    Tk = keys.shape[-2]
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(dtype=queries.dtype, device=queries.device)
    pos = torch.arange(Tq, device=queries.device)[:, None] + (Tk - Tq)  # bottom-right alignment
    j = torch.arange(Tk, device=queries.device)[None, :]
    distance = (pos - j).abs().to(queries.dtype)  # (Tq, Tk)
    allowed = j <= pos if is_causal else torch.ones(Tq, Tk, dtype=torch.bool, device=queries.device)
    if mask is not None:
        allowed = allowed & mask
    mask = allowed  # broadcast to (B, H, Tq, Tk)
    scores = queries @ keys.transpose(-2, -1) / d**0.5
    scores = scores - slopes[:, None, None] * distance  # the bias, added after the scaling
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(filled, dim=-1) * mask
    return weights @ values, weights
