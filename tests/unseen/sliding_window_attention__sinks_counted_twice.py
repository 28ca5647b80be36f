"""BUG: keys[:num_sinks] concatenated even where the block's window range already holds them (a variant of the catalogued sinks_counted_twice that differs from it on self-attention calls, Tq = Tk: not named there)
STYLE: StreamingLLM
"""
"""Sliding window + attention sinks, StreamingLLM's KV layout per query block:
[sink keys] + [recent window keys], concatenated, then one softmax.

BUG: the sink part is always keys[:num_sinks], even when the window range of the block already
starts at 0, so a sink that is also inside the window range appears twice in the softmax
(early queries, or a wide window).
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    for name, val, low in (("window", window, 1), ("num_sinks", num_sinks, 0), ("block_size", block_size, 1)):
        if isinstance(val, bool) or not isinstance(val, int) or val < low:
            raise ValueError(f"bad {name}: {val!r}")
    Tq, d = queries.shape[-2:]
    Tk, dv = keys.shape[-2], values.shape[-1]
    shift = Tk - Tq
    out = torch.zeros(*queries.shape[:-1], dv, dtype=queries.dtype, device=queries.device)
    ns = min(num_sinks, Tk)
    for s0 in range(0, Tq, block_size):
        s1 = min(s0 + block_size, Tq)
        lo = max(0, s0 + shift - window + 1)
        hi = min(Tk, s1 + shift)
        if hi <= 0:
            continue
        kk = torch.cat([keys[..., :ns, :], keys[..., lo:hi, :]], dim=-2)
        vv = torch.cat([values[..., :ns, :], values[..., lo:hi, :]], dim=-2)
        j = torch.cat([torch.arange(ns), torch.arange(lo, hi)]).to(queries.device)[None, :]
        pos = (torch.arange(s0, s1, device=queries.device) + shift)[:, None]
        ok = (j <= pos) & ((j > pos - window) | (j < num_sinks))
        sc = queries[..., s0:s1, :] @ kk.transpose(-1, -2) / math.sqrt(d)
        sc = sc.masked_fill(~ok, float("-inf"))
        m = sc.amax(-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e = torch.exp(sc - m)
        den = e.sum(-1, keepdim=True)
        out[..., s0:s1, :] = (e @ vv) / torch.where(den > 0, den, torch.ones_like(den))
    return out
