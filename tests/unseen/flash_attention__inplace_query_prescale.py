"""BUG: each query tile is pre-scaled with `q *= scale` on a slice of the caller's tensor, so the queries are modified in place (the first call's values are right; autograd on a leaf query raises).
STAGE: the inputs
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block_q and block_k must be >= 1")
    Tq, d = queries.shape[-2:]
    Tk, dv = keys.shape[-2], values.shape[-1]
    dtype = queries.dtype
    wd = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    scale = 1.0 / math.sqrt(d)
    off = Tk - Tq
    dev = queries.device
    outs, lses = [], []
    for i in range(0, Tq, block_q):
        j_hi = min(i + block_q, Tq)
        q = queries[..., i:j_hi, :]
        q *= scale
        q = q.to(wd)
        m = torch.full(q.shape[:-1], float("-inf"), dtype=wd, device=dev)
        l = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-1], dv, dtype=wd, device=dev)
        for j in range(0, Tk, block_k):
            je = min(j + block_k, Tk)
            if is_causal and j > j_hi - 1 + off:
                break
            s = q @ keys[..., j:je, :].to(wd).transpose(-1, -2)
            if is_causal:
                bad = torch.arange(j, je, device=dev)[None, :] > torch.arange(i, j_hi, device=dev)[:, None] + off
                s = s.masked_fill(bad, float("-inf"))
            m_new = torch.maximum(m, s.detach().amax(-1))
            m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = (s - m_safe[..., None]).exp()
            a = (m - m_safe).exp()
            l = a * l + p.sum(-1)
            acc = a[..., None] * acc + p @ values[..., j:je, :].to(wd)
            m = m_new
        ok = l > 0
        den = torch.where(ok, l, torch.ones_like(l))
        outs.append(acc / den[..., None])
        lses.append(torch.where(ok, m + den.log(), torch.full_like(m, float("-inf"))))
    return torch.cat(outs, -2).to(dtype), torch.cat(lses, -1).to(dtype)
