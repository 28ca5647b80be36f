"""BUG: the softmax scale is taken from the values' feature size, 1/sqrt(dv), instead of the queries'/keys' d; right only when dv == d.
STAGE: the scores
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1:
        raise ValueError("block_q must be >= 1")
    if block_k < 1:
        raise ValueError("block_k must be >= 1")
    n_q, head_dim = queries.shape[-2], queries.shape[-1]
    n_k = keys.shape[-2]
    d_v = values.shape[-1]
    in_dtype = queries.dtype
    wdt = torch.float32 if in_dtype in (torch.float16, torch.bfloat16) else in_dtype
    NEG = torch.finfo(wdt).min
    sm_scale = 1.0 / math.sqrt(d_v)
    dev = queries.device

    outputs, lses = [], []
    for start in range(0, n_q, block_q):
        stop = min(start + block_q, n_q)
        qb = queries[..., start:stop, :].to(wdt)
        m = torch.full(qb.shape[:-1], NEG, dtype=wdt, device=dev)
        l = torch.zeros(qb.shape[:-1], dtype=wdt, device=dev)
        o = torch.zeros(*qb.shape[:-1], d_v, dtype=wdt, device=dev)
        rows = torch.arange(start, stop, device=dev)
        for ks in range(0, n_k, block_k):
            ke = min(ks + block_k, n_k)
            sc = torch.matmul(qb, keys[..., ks:ke, :].to(wdt).transpose(-2, -1)) * sm_scale
            if is_causal:
                cols = torch.arange(ks, ke, device=dev)
                future = cols[None, :] > (rows[:, None] + (n_k - n_q))
                sc = sc.masked_fill(future, NEG)
            m_next = torch.maximum(m, sc.amax(dim=-1)).detach()
            p = torch.exp(sc - m_next.unsqueeze(-1))
            rescale = torch.exp(m - m_next)
            l = l * rescale + p.sum(dim=-1)
            o = o * rescale.unsqueeze(-1) + torch.matmul(p, values[..., ks:ke, :].to(wdt))
            m = m_next
        if is_causal:
            has_key = (rows + (n_k - n_q)) >= 0
        else:
            has_key = torch.full((stop - start,), n_k > 0, dtype=torch.bool, device=dev)
        l_safe = torch.where(has_key, l, torch.ones_like(l))
        o = torch.where(has_key[:, None], o / l_safe.unsqueeze(-1), torch.zeros_like(o))
        lse = torch.where(has_key, m + torch.log(l_safe), torch.full_like(m, float("-inf")))
        outputs.append(o)
        lses.append(lse)
    return torch.cat(outputs, dim=-2).to(in_dtype), torch.cat(lses, dim=-1).to(in_dtype)
