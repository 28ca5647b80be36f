"""
BUG: window, num_sinks and block_size are never validated, so window<1 silently returns zeros, num_sinks<0 is quietly treated as 0 and block_size<0 returns an empty (..., 0, dv) tensor instead of raising ValueError (block_size=0 only fails by accident inside range()).
STAGE: argument validation
Style: FlashAttention-like online softmax over key sub-blocks (sinks, then band) inside each query block.
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    Tq, d = queries.shape[-2:]
    Tk, dv = values.shape[-2:]
    lead = queries.shape[:-2]
    off = Tk - Tq
    acc_dtype = torch.float64 if queries.dtype == torch.float64 else torch.float32
    dev = queries.device
    qk_scale = d ** -0.5

    out_rows = []
    for i0 in range(0, Tq, block_size):
        i1 = min(i0 + block_size, Tq)
        rows = i1 - i0
        q = queries[..., i0:i1, :].to(acc_dtype) * qk_scale
        qpos = torch.arange(i0 + off, i1 + off, device=dev).unsqueeze(1)
        band_lo = max(i0 + off - window + 1, 0)
        band_hi = min(i1 + off, Tk)
        sink_end = min(num_sinks, band_lo)
        tiles = [(j, min(j + block_size, sink_end)) for j in range(0, sink_end, block_size)]
        tiles += [(j, min(j + block_size, band_hi)) for j in range(band_lo, band_hi, block_size)]

        m = torch.full(lead + (rows, 1), float("-inf"), dtype=acc_dtype, device=dev)
        l = torch.zeros(lead + (rows, 1), dtype=acc_dtype, device=dev)
        o = torch.zeros(lead + (rows, dv), dtype=acc_dtype, device=dev)
        for j0, j1 in tiles:
            kpos = torch.arange(j0, j1, device=dev).unsqueeze(0)
            allowed = (kpos <= qpos) & ((kpos > qpos - window) | (kpos < num_sinks))
            s = q @ keys[..., j0:j1, :].to(acc_dtype).transpose(-1, -2)
            s = s.masked_fill(~allowed, float("-inf"))
            m_next = torch.maximum(m, s.amax(-1, keepdim=True).detach())
            m_ref = torch.where(m_next == float("-inf"), torch.zeros_like(m_next), m_next)
            scale_old = torch.exp(m - m_ref)
            p = torch.exp(s - m_ref)
            l = l * scale_old + p.sum(-1, keepdim=True)
            o = o * scale_old + p @ values[..., j0:j1, :].to(acc_dtype)
            m = m_next
        out_rows.append((o / torch.where(l > 0, l, torch.ones_like(l))).to(queries.dtype))
    if not out_rows:
        return queries.new_zeros(lead + (0, dv))
    return torch.cat(out_rows, dim=-2)
