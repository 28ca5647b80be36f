"""BUG: queries aligned to the top left: pos(i) = i instead of i + Tk - Tq (the sink tile, then block_size-wide tiles of the window range) with an online softmax)
STAGE: the catalogue's top_left
"""
import math
import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if not window >= 1 or not num_sinks >= 0 or not block_size >= 1:
        raise ValueError(f"bad window={window}, num_sinks={num_sinks}, block_size={block_size}")
    *lead, Tq, d = queries.shape
    Tk, dv = keys.shape[-2], values.shape[-1]
    off = 0
    acc_t = torch.promote_types(queries.dtype, torch.float32)
    NEG = torch.finfo(acc_t).min
    sm_scale = d ** -0.5
    dev = queries.device
    out_blocks = []
    for start in range(0, Tq, block_size):
        stop = min(start + block_size, Tq)
        q = queries[..., start:stop, :].to(acc_t) * sm_scale
        pos = torch.arange(start + off, stop + off, device=dev).unsqueeze(-1)   # (bq, 1)
        lo = max(0, start + off - window + 1)
        hi = min(Tk, stop + off)                     # exclusive
        tiles = []
        if min(num_sinks, lo) > 0:
            tiles.append((0, min(num_sinks, lo)))
        for ks in range(lo, hi, block_size):
            tiles.append((ks, min(ks + block_size, hi)))
        m = torch.full((*lead, stop - start, 1), NEG, dtype=acc_t, device=dev)
        l = torch.zeros((*lead, stop - start, 1), dtype=acc_t, device=dev)
        acc = torch.zeros((*lead, stop - start, dv), dtype=acc_t, device=dev)
        for ks, ke in tiles:
            j = torch.arange(ks, ke, device=dev).unsqueeze(0)                # (1, bk)
            ok = (j <= pos) & ((j > pos - window) | (j < num_sinks))
            s = q @ keys[..., ks:ke, :].to(acc_t).transpose(-1, -2)
            s = s.masked_fill(~ok, NEG)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new) * ok
            corr = torch.exp(m - m_new)
            l = l * corr + p.sum(-1, keepdim=True)
            acc = acc * corr + p @ values[..., ks:ke, :].to(acc_t)
            m = m_new
        o = acc / torch.where(l > 0, l, torch.ones_like(l))
        out_blocks.append(o.to(queries.dtype))
    return torch.cat(out_blocks, dim=-2)
