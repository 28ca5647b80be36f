"""BUG: j >= pos - window: window + 1 keys
STYLE: Mistral
"""
"""Mistral-style sliding window (blocked), with attention sinks.

BUG: the window test is `j >= pos - window` (the window counted as `window` keys *before* the
query, plus the query itself), so every query sees window + 1 keys once it is far enough from
the start.
"""
import math

import torch


def _check(name, v, lo):
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}")


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    _check("window", window, 1)
    _check("num_sinks", num_sinks, 0)
    _check("block_size", block_size, 1)
    Tq, d = queries.shape[-2:]
    Tk, dv = keys.shape[-2], values.shape[-1]
    off = Tk - Tq
    chunks = []
    for a in range(0, Tq, block_size):
        b = min(a + block_size, Tq)
        pos = torch.arange(a, b, device=queries.device)[:, None] + off
        lo = max(0, a + off - window)
        hi = max(0, min(Tk, b + off))
        ns = min(num_sinks, lo)
        j = torch.cat([torch.arange(ns, device=queries.device), torch.arange(lo, hi, device=queries.device)])[None]
        kb = torch.cat([keys[..., :ns, :], keys[..., lo:hi, :]], -2)
        vb = torch.cat([values[..., :ns, :], values[..., lo:hi, :]], -2)
        ok = (j <= pos) & ((j >= pos - window) | (j < num_sinks))
        s = torch.einsum("...qd,...kd->...qk", queries[..., a:b, :], kb) / math.sqrt(d)
        s = torch.where(ok, s, torch.full_like(s, -math.inf))
        mx = s.amax(-1, keepdim=True).nan_to_num(neginf=0.0) if s.shape[-1] else s.sum(-1, keepdim=True)
        mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
        p = torch.exp(s - mx)
        den = p.sum(-1, keepdim=True)
        chunks.append(torch.einsum("...qk,...kd->...qd", p, vb) / torch.where(den > 0, den, torch.ones_like(den)))
    return torch.cat(chunks, -2)
