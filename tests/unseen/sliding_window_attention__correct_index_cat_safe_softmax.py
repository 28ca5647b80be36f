"""
BUG: none
Style: per block the key index list is torch.cat(arange(sinks), arange(band)); keys/values are
gathered by fancy indexing, the mask comes from the index list, and a hand-written "safe"
softmax (finite max, zero-denominator guard) avoids NaN rows.
"""
import math

import torch


def _key_index(n_sinks, lo, hi, device):
    return torch.cat((torch.arange(0, n_sinks, device=device), torch.arange(lo, hi, device=device)))


def _safe_softmax(x, mask):
    x = x.masked_fill(~mask, float("-inf"))
    m = x.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(x - m)
    den = e.sum(dim=-1, keepdim=True)
    den = torch.where(den > 0, den, torch.ones_like(den))
    return e / den


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    for _name, _n in (("window", window), ("num_sinks", num_sinks), ("block_size", block_size)):
        if isinstance(_n, bool) or not isinstance(_n, int):
            raise ValueError(f"{_name} must be an int, got {_n!r}")
    for name, val, lo_ok in (("window", window, 1), ("num_sinks", num_sinks, 0), ("block_size", block_size, 1)):
        if val < lo_ok:
            raise ValueError(f"{name} must be >= {lo_ok}, got {val}")
    if not (queries.shape[:-2] == keys.shape[:-2] == values.shape[:-2]) or queries.dim() > 4:
        raise ValueError("queries, keys and values need the same 0, 1 or 2 leading dims")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("shape mismatch between queries/keys/values")

    n_q = queries.shape[-2]
    n_k = keys.shape[-2]
    feat = queries.shape[-1]
    delta = n_k - n_q
    dtype = queries.dtype
    calc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    pieces = []
    for b0 in range(0, n_q, block_size):
        b1 = min(b0 + block_size, n_q)
        pos = torch.arange(b0 + delta, b1 + delta, device=queries.device)
        lo = max(b0 + delta - (window - 1), 0)
        hi = max(min(b1 + delta, n_k), lo)
        idx = _key_index(min(num_sinks, lo), lo, hi, queries.device)
        if idx.numel() == 0:
            # the whole block lies before key 0: nothing to attend to
            pieces.append(queries.new_zeros(queries.shape[:-2] + (b1 - b0, values.shape[-1])))
            continue

        k_sel = keys[..., idx, :].to(calc)
        v_sel = values[..., idx, :].to(calc)
        q_sel = queries[..., b0:b1, :].to(calc)

        rel = pos[:, None] - idx[None, :]          # how far back each key is
        mask = (rel >= 0) & ((rel < window) | (idx[None, :] < num_sinks))

        s = torch.matmul(q_sel, k_sel.transpose(-1, -2)) / math.sqrt(feat)
        w = _safe_softmax(s, mask)
        pieces.append(torch.matmul(w, v_sel).to(dtype))
    if not pieces:
        return queries.new_zeros(queries.shape[:-2] + (0, values.shape[-1]))
    return torch.cat(pieces, dim=-2)
