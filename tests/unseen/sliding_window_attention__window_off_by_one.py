"""
BUG: the window is treated as "window keys before the query plus the query itself", so every query sees window + 1 keys (j >= pos - window instead of j > pos - window).
STAGE: the allowed-key mask (and the band start of each block)
Style: per-block loop with an additive 0/-inf bias built from relative distances.
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1:
        raise ValueError("window must be >= 1")
    if num_sinks < 0:
        raise ValueError("num_sinks must be >= 0")
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    if queries.shape[:-2] != keys.shape[:-2] or keys.shape[:-2] != values.shape[:-2] or queries.dim() > 4:
        raise ValueError("leading dims must match (0, 1 or 2 of them)")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("shape mismatch")

    Lq, Lk = queries.shape[-2], keys.shape[-2]
    dk, dv = keys.shape[-1], values.shape[-1]
    off = Lk - Lq
    dt = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    dev = queries.device

    out = []
    for start in range(0, Lq, block_size):
        stop = min(start + block_size, Lq)
        p0, p1 = start + off, stop - 1 + off
        # keys a query can look back to: pos - window .. pos
        k_lo = max(p0 - window, 0)
        k_hi = min(p1 + 1, Lk)
        if k_hi <= 0:
            out.append(queries.new_zeros(queries.shape[:-2] + (stop - start, dv)))
            continue
        n_sink = min(num_sinks, k_lo)
        kidx = torch.cat([torch.arange(n_sink, device=dev), torch.arange(k_lo, k_hi, device=dev)])
        qpos = torch.arange(p0, p1 + 1, device=dev)
        dist = qpos[:, None] - kidx[None, :]
        visible = (dist >= 0) & ((dist <= window) | (kidx[None, :] < num_sinks))
        bias = torch.zeros(visible.shape, dtype=dt, device=dev).masked_fill(~visible, float("-inf"))

        kb = keys[..., kidx, :].to(dt)
        vb = values[..., kidx, :].to(dt)
        qb = queries[..., start:stop, :].to(dt)
        att = qb @ kb.transpose(-2, -1) / math.sqrt(dk) + bias
        att = torch.softmax(att, dim=-1)
        att = att.masked_fill(~visible.any(-1, keepdim=True), 0.0)
        out.append((att @ vb).to(queries.dtype))
    if not out:
        return queries.new_zeros(queries.shape[:-2] + (0, dv))
    return torch.cat(out, dim=-2)
