"""BUG: none
STYLE: StreamingLLM-style course solution: per block, index_select of the union {sinks before the window} + window range, einsum, float64 internal accumulation, HF finfo.min masking then zeroing of empty rows
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1:
        raise ValueError("window < 1")
    if num_sinks < 0:
        raise ValueError("num_sinks < 0")
    if block_size < 1:
        raise ValueError("block_size < 1")
    out_dtype = queries.dtype
    wide = torch.float64
    Tq, Tk = queries.shape[-2], keys.shape[-2]
    shift = Tk - Tq
    scale = queries.shape[-1] ** -0.5
    dev = queries.device
    neg = torch.finfo(wide).min
    pieces = []
    for b0 in range(0, Tq, block_size):
        b1 = min(Tq, b0 + block_size)
        first = b0 + shift - (window - 1)
        last = b1 - 1 + shift
        lo = max(first, 0)
        hi = min(last + 1, Tk)
        window_idx = torch.arange(lo, max(lo, hi), device=dev, dtype=torch.long)
        sink_idx = torch.arange(0, min(num_sinks, lo, Tk), device=dev, dtype=torch.long)
        idx = torch.cat([sink_idx, window_idx])
        q = queries[..., b0:b1, :].to(wide)
        if idx.numel() == 0:
            pieces.append(torch.zeros(q.shape[:-1] + values.shape[-1:], dtype=out_dtype, device=dev) + 0 * q.sum(-1, keepdim=True).to(out_dtype))
            continue
        k = keys.index_select(-2, idx).to(wide)
        v = values.index_select(-2, idx).to(wide)
        qpos = torch.arange(b0, b1, device=dev) + shift
        ok = (idx[None, :] <= qpos[:, None]) & (
            (idx[None, :] > qpos[:, None] - window) | (idx[None, :] < num_sinks)
        )
        s = torch.einsum("...qd,...kd->...qk", q, k) * scale
        s = torch.where(ok, s, torch.full_like(s, neg))
        w = torch.softmax(s, dim=-1) * ok.to(wide)
        o = torch.einsum("...qk,...kd->...qd", w, v)
        pieces.append(o.to(out_dtype))
    return torch.cat(pieces, dim=-2)
