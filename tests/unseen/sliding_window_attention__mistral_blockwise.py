"""BUG: none
STYLE: HF Mistral / StreamingLLM port: per query block, a contiguous key slice plus the sinks before it, masked_fill(-inf) and a safe softmax
"""
import math

import torch


def _check(window, num_sinks, block_size):
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if num_sinks < 0:
        raise ValueError(f"num_sinks must be >= 0, got {num_sinks}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    _check(window, num_sinks, block_size)
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    offset = Tk - Tq
    scale = 1.0 / math.sqrt(d)
    dev = queries.device
    outs = []
    for qs in range(0, Tq, block_size):
        qe = min(qs + block_size, Tq)
        q = queries[..., qs:qe, :]
        lo = max(0, qs + offset - window + 1)
        hi = max(0, min(Tk, qe + offset))
        lo = min(lo, hi)
        sink_hi = min(num_sinks, lo)
        if sink_hi + (hi - lo) == 0:
            outs.append(q.new_zeros(q.shape[:-1] + (dv,)) + 0 * q.sum(-1, keepdim=True))
            continue
        key_idx = torch.cat([torch.arange(0, sink_hi, device=dev), torch.arange(lo, hi, device=dev)])
        k = torch.cat([keys[..., :sink_hi, :], keys[..., lo:hi, :]], dim=-2)
        v = torch.cat([values[..., :sink_hi, :], values[..., lo:hi, :]], dim=-2)
        pos = torch.arange(qs, qe, device=dev) + offset
        j = key_idx[None, :]
        p = pos[:, None]
        allowed = (j <= p) & ((j > p - window) | (j < num_sinks))
        s = torch.matmul(q, k.transpose(-1, -2)) * scale
        s = s.masked_fill(~allowed, float("-inf"))
        m = s.amax(dim=-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
        e = torch.exp(s - m)
        denom = e.sum(dim=-1, keepdim=True)
        o = torch.matmul(e, v) / torch.where(denom > 0, denom, torch.ones_like(denom))
        outs.append(o)
    return torch.cat(outs, dim=-2)
