"""BUG: none
STYLE: partial results per block merged through their logsumexp, einsum, a preallocated output
"""
"""Blockwise attention that merges normalised partial results through their logsumexp
(the way xformers' merge_attentions and split-KV decoding combine partials).

Each key block gives (o_blk, lse_blk) for a query block; partials are merged pairwise.
"""
import math

import torch


def _partial(s, v):
    """softmax(s) @ v over the finite entries of s, and the row logsumexp (-inf when empty)."""
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m)
    den = p.sum(-1, keepdim=True)
    ok = den > 0
    den1 = torch.where(ok, den, torch.ones_like(den))
    o = torch.einsum("lqk,lkd->lqd", p, v) / den1
    lse = torch.where(ok, m + torch.log(den1), torch.full_like(den, -math.inf))
    return o, lse.squeeze(-1)


def _merge(o1, lse1, o2, lse2):
    mx = torch.maximum(lse1, lse2)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    e1, e2 = torch.exp(lse1 - mx), torch.exp(lse2 - mx)
    tot = e1 + e2
    ok = tot > 0
    tot1 = torch.where(ok, tot, torch.ones_like(tot))
    o = (o1 * e1[..., None] + o2 * e2[..., None]) / tot1[..., None]
    lse = torch.where(ok, mx + torch.log(tot1), torch.full_like(tot, -math.inf))
    return o, lse


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    for b in (block_q, block_k):
        if b < 1:
            raise ValueError("block_q and block_k must be positive")
    shape = queries.shape
    Tq, d = shape[-2], shape[-1]
    Tk, dv = keys.shape[-2], values.shape[-1]
    work = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    q = queries.flatten(0, -3) if queries.dim() > 2 else queries[None]
    k = keys.flatten(0, -3) if keys.dim() > 2 else keys[None]
    v = values.flatten(0, -3) if values.dim() > 2 else values[None]
    L = q.shape[0]
    scale = d ** -0.5
    diag = Tk - Tq

    out = torch.empty(L, Tq, dv, dtype=work, device=queries.device)
    lse = torch.empty(L, Tq, dtype=work, device=queries.device)
    for qs in range(0, Tq, block_q):
        qe = min(qs + block_q, Tq)
        qb = q[:, qs:qe].to(work)
        o_run = torch.zeros(L, qe - qs, dv, dtype=work, device=queries.device)
        lse_run = torch.full((L, qe - qs), -math.inf, dtype=work, device=queries.device)
        last_key = (qe - 1 + diag) if is_causal else Tk - 1
        for ks in range(0, min(Tk, last_key + 1), block_k):
            ke = min(ks + block_k, Tk)
            s = torch.einsum("lqd,lkd->lqk", qb, k[:, ks:ke].to(work)) * scale
            if is_causal:
                rows = torch.arange(qs, qe, device=queries.device)[:, None] + diag
                cols = torch.arange(ks, ke, device=queries.device)[None, :]
                s = torch.where(cols <= rows, s, torch.full_like(s, -math.inf))
            o_b, lse_b = _partial(s, v[:, ks:ke].to(work))
            o_run, lse_run = _merge(o_run, lse_run, o_b, lse_b)
        out[:, qs:qe] = o_run
        lse[:, qs:qe] = lse_run
    return (out.reshape(*shape[:-2], Tq, dv).to(queries.dtype),
            lse.reshape(*shape[:-2], Tq).to(queries.dtype))
