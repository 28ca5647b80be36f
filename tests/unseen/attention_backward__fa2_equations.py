"""BUG: none
STYLE: FlashAttention-2 paper, Algorithm 2 written densely: dV = P^T dO, dP = dO V^T, D = rowsum(dO * O), dS = P * (dP - D), dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d).
"""
import math
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    out_dtype = queries.dtype
    cd = torch.promote_types(out_dtype, torch.float32)
    q, k, v, do = (t.to(cd) for t in (queries, keys, values, grad_output))
    Tq, Tk = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if is_causal:
        i = torch.arange(Tq, device=q.device)[:, None]
        j = torch.arange(Tk, device=q.device)[None, :]
        s = s.masked_fill(j > i + (Tk - Tq), float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)
    p = p / torch.where(l > 0, l, torch.ones_like(l))
    o = torch.matmul(p, v)
    dv = torch.matmul(p.transpose(-1, -2), do)
    dp = torch.matmul(do, v.transpose(-1, -2))
    D = (do * o).sum(dim=-1, keepdim=True)
    ds = p * (dp - D)
    dq = torch.matmul(ds, k) * scale
    dk = torch.matmul(ds.transpose(-1, -2), q) * scale
    return dq.to(out_dtype), dk.to(out_dtype), dv.to(out_dtype)
