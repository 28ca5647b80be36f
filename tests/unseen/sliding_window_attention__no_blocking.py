"""BUG: block_size ignored: all queries in one block, so a (.., Tq, Tk)-size score matrix is built (memory bound broken) range the block can see, prepend the sinks before that range, boolean mask + masked_fill)
STAGE: the catalogue's full_scores
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
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    lead = queries.shape[:-2]
    work = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    scale = 1.0 / math.sqrt(d)
    dev = queries.device
    outs = []
    block_size = max(Tq, 1)
    for qs in range(0, Tq, block_size):
        qe = min(qs + block_size, Tq)
        pos = torch.arange(qs, qe, device=dev) + (Tk - Tq)          # (bq,)
        p_first, p_last = qs + Tk - Tq, qe - 1 + Tk - Tq
        lo = max(0, p_first - window + 1)
        hi = min(Tk - 1, p_last)
        if hi < lo:
            outs.append(torch.zeros(*lead, qe - qs, dv, dtype=queries.dtype, device=dev))
            continue
        ns = min(num_sinks, lo)
        idx = torch.cat([torch.arange(ns, device=dev), torch.arange(lo, hi + 1, device=dev)])
        k = torch.cat([keys[..., :ns, :], keys[..., lo:hi + 1, :]], dim=-2).to(work)
        v = torch.cat([values[..., :ns, :], values[..., lo:hi + 1, :]], dim=-2).to(work)
        q = queries[..., qs:qe, :].to(work)
        allowed = (idx[None, :] <= pos[:, None]) & (
            (idx[None, :] > pos[:, None] - window) | (idx[None, :] < num_sinks))
        s = (q @ k.transpose(-1, -2)) * scale
        s = s.masked_fill(~allowed, torch.finfo(work).min)
        p = torch.softmax(s, dim=-1) * allowed
        outs.append((p @ v).to(queries.dtype))
    return torch.cat(outs, dim=-2)
