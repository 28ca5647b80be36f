"""
BUG: the start of each block's key band is computed from the block's last query (last_pos - window + 1) instead of its first, so earlier rows of a block lose the oldest keys of their window (results depend on block_size).
STAGE: the key range of each query block
Style: torch.cat of arange(sinks) and arange(band) as an index list, fancy-index gather, hand-written safe softmax.
"""
import math

import torch


def _safe_softmax(x, mask):
    x = x.masked_fill(~mask, float("-inf"))
    m = x.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(x - m)
    den = e.sum(dim=-1, keepdim=True)
    return e / torch.where(den > 0, den, torch.ones_like(den))


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    for name, val, least in (("window", window, 1), ("num_sinks", num_sinks, 0), ("block_size", block_size, 1)):
        if val < least:
            raise ValueError(f"{name} must be >= {least}, got {val}")
    if not (queries.shape[:-2] == keys.shape[:-2] == values.shape[:-2]) or queries.dim() > 4:
        raise ValueError("queries, keys and values need the same 0, 1 or 2 leading dims")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("shape mismatch")

    n_q, n_k, feat = queries.shape[-2], keys.shape[-2], queries.shape[-1]
    delta = n_k - n_q
    calc = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    dev = queries.device
    pieces = []
    for b0 in range(0, n_q, block_size):
        b1 = min(b0 + block_size, n_q)
        last = b1 - 1 + delta
        lo = max(last - window + 1, 0)
        hi = max(min(last + 1, n_k), lo)
        idx = torch.cat((torch.arange(min(num_sinks, lo), device=dev), torch.arange(lo, hi, device=dev)))
        if idx.numel() == 0:
            pieces.append(queries.new_zeros(queries.shape[:-2] + (b1 - b0, values.shape[-1])))
            continue
        pos = torch.arange(b0 + delta, b1 + delta, device=dev)
        rel = pos[:, None] - idx[None, :]
        mask = (rel >= 0) & ((rel < window) | (idx[None, :] < num_sinks))
        s = keys[..., idx, :].to(calc)
        s = torch.matmul(queries[..., b0:b1, :].to(calc), s.transpose(-1, -2)) / math.sqrt(feat)
        pieces.append(torch.matmul(_safe_softmax(s, mask), values[..., idx, :].to(calc)).to(queries.dtype))
    if not pieces:
        return queries.new_zeros(queries.shape[:-2] + (0, values.shape[-1]))
    return torch.cat(pieces, dim=-2)
