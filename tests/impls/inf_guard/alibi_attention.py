"""-inf fill, NaN rows (no allowed key) replaced by zeros before the backward can see them."""
import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError("num_heads >= 1")
    c = 1
    while c * 2 <= num_heads:
        c *= 2
    own = torch.arange(1, c + 1, dtype=torch.float64)
    more = torch.arange(num_heads - c, dtype=torch.float64) * 2 + 1
    return torch.cat([2.0 ** (-8.0 * own / c), 2.0 ** (-8.0 * more / (2 * c))])


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    H, Tq, d = queries.shape[1:]
    Tk = keys.shape[2]
    slopes = (alibi_slopes(H) if slopes is None else slopes).to(dtype=queries.dtype, device=queries.device)
    pos = torch.arange(Tq, device=queries.device) + Tk - Tq
    dist = (pos[:, None] - torch.arange(Tk, device=queries.device)[None, :]).to(queries.dtype)
    ok = (dist >= 0) if is_causal else torch.ones(Tq, Tk, dtype=torch.bool, device=queries.device)
    if mask is not None:
        ok = ok & mask
    ok = ok.expand(queries.shape[0], H, Tq, Tk)
    scores = queries @ keys.transpose(-1, -2) / d**0.5 - slopes.view(H, 1, 1) * dist.abs()
    scores = torch.where(ok, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
    empty = ~ok.any(-1, keepdim=True)
    scores = torch.where(empty, torch.zeros_like(scores), scores)  # no -inf-only row: no NaN, forward or backward
    weights = torch.where(ok, torch.softmax(scores, dim=-1), torch.zeros_like(scores))
    return weights @ values, weights
