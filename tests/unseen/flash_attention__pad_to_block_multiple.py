"""BUG: F.pad to a multiple of the block: right values, past the memory bound
STYLE: padded blocks
"""
"""Tiled attention with an online softmax, blocks taken with view/reshape after padding.

The inputs are padded to a multiple of the block sizes so that every block is full (what a
Triton kernel without boundary checks needs); padded keys are masked and padded query rows are
dropped at the end. Values are right.

BUG: padding copies the whole input, larger than any input or output, so the contract's memory
bound breaks whenever Tq or Tk is not a multiple of its block size.
"""
import math

import torch
import torch.nn.functional as F


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be >= 1")
    lead = queries.shape[:-2]
    Tq, d = queries.shape[-2:]
    Tk, dv = keys.shape[-2], values.shape[-1]
    pq = (-Tq) % block_q
    pk = (-Tk) % block_k
    q = F.pad(queries.reshape(-1, Tq, d), (0, 0, 0, pq))
    k = F.pad(keys.reshape(-1, Tk, d), (0, 0, 0, pk))
    v = F.pad(values.reshape(-1, Tk, dv), (0, 0, 0, pk))
    L = q.shape[0]
    scale = 1.0 / math.sqrt(d)
    out_rows, lse_rows = [], []
    for qb in range(q.shape[1] // block_q):
        qi = q[:, qb * block_q:(qb + 1) * block_q] * scale
        qpos = torch.arange(qb * block_q, (qb + 1) * block_q, device=q.device) + (Tk - Tq)
        m = torch.full((L, block_q), -math.inf, dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(L, block_q, dv, dtype=q.dtype, device=q.device)
        for kb in range(k.shape[1] // block_k):
            kpos = torch.arange(kb * block_k, (kb + 1) * block_k, device=q.device)
            s = qi @ k[:, kb * block_k:(kb + 1) * block_k].transpose(1, 2)
            ok = (kpos < Tk)[None, :].expand(block_q, block_k)
            if is_causal:
                ok = ok & (kpos[None, :] <= qpos[:, None])
            s = s.masked_fill(~ok, -math.inf)
            m2 = torch.maximum(m, s.amax(-1))
            m2s = torch.where(torch.isfinite(m2), m2, torch.zeros_like(m2))
            p = torch.exp(s - m2s[..., None])
            a = torch.exp(m - m2s)
            l = l * a + p.sum(-1)
            acc = acc * a[..., None] + p @ v[:, kb * block_k:(kb + 1) * block_k]
            m = m2
        l1 = torch.where(l > 0, l, torch.ones_like(l))
        out_rows.append(acc / l1[..., None])
        lse_rows.append(torch.where(l > 0, m + torch.log(l1), torch.full_like(l, -math.inf)))
    out = torch.cat(out_rows, 1)[:, :Tq]
    lse = torch.cat(lse_rows, 1)[:, :Tq]
    return out.reshape(*lead, Tq, dv), lse.reshape(*lead, Tq)
