"""BUG: Mistral's whole (Tq, Tk) mask built first: right values, past the memory bound
STYLE: Mistral
"""
"""Sliding-window attention with sinks: the mask is built once, as Mistral's reference
`_make_sliding_window_causal_mask` does, then queries are processed block by block against the
key range they can see.

BUG: the (Tq, Tk) boolean mask is allocated in full, which breaks the contract's memory bound on
long sequences, though every value is right.
"""
import math

import torch


def _sliding_mask(Tq, Tk, window, num_sinks, device):
    causal = torch.ones(Tq, Tk, dtype=torch.bool, device=device).tril(Tk - Tq)
    in_window = ~torch.ones(Tq, Tk, dtype=torch.bool, device=device).tril(Tk - Tq - window)
    sink = torch.arange(Tk, device=device)[None, :] < num_sinks
    return causal & (in_window | sink)


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    for name, v, lo in (("window", window, 1), ("num_sinks", num_sinks, 0), ("block_size", block_size, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    Tq, d = queries.shape[-2:]
    Tk, dv = keys.shape[-2], values.shape[-1]
    mask = _sliding_mask(Tq, Tk, window, num_sinks, queries.device)
    out = queries.new_zeros(*queries.shape[:-1], dv)
    off = Tk - Tq
    for i0 in range(0, Tq, block_size):
        i1 = min(i0 + block_size, Tq)
        lo = max(0, i0 + off - window + 1)
        hi = min(Tk, i1 + off)
        if hi <= 0:
            continue
        ns = min(num_sinks, lo)
        cols = torch.cat([torch.arange(ns, device=queries.device), torch.arange(lo, hi, device=queries.device)])
        ok = mask[i0:i1][:, cols]
        kb = keys.index_select(-2, cols)
        vb = values.index_select(-2, cols)
        s = queries[..., i0:i1, :] @ kb.transpose(-1, -2) * (1.0 / math.sqrt(d))
        s = s.masked_fill(~ok, float("-inf"))
        m = s.amax(-1, keepdim=True).detach()
        m = m.masked_fill(~torch.isfinite(m), 0.0)
        e = torch.exp(s - m)
        den = e.sum(-1, keepdim=True)
        out[..., i0:i1, :] = (e @ vb) / den.masked_fill(den == 0, 1.0)
    return out
