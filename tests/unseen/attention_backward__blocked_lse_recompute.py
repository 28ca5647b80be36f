"""BUG: none
STYLE: two sweeps over key blocks: lse first, then P recomputed from it
"""
"""FlashAttention-2 style backward: forward statistics (lse) by key blocks, then a second sweep
over key blocks recomputing P from lse."""
import math

import torch

BLOCK_K = 16


def _block_scores(q, k, j0, is_causal, Tq, Tk, scale):
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if is_causal:
        rows = torch.arange(Tq, device=q.device).unsqueeze(1)
        cols = torch.arange(j0, j0 + k.shape[-2], device=q.device).unsqueeze(0)
        s = s.masked_fill(cols > rows + (Tk - Tq), float("-inf"))
    return s


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    Tq, Tk = queries.shape[-2], keys.shape[-2]
    acc = torch.promote_types(queries.dtype, torch.float32)
    q, k, v, do = (t.to(acc) for t in (queries, keys, values, grad_output))
    scale = 1.0 / math.sqrt(q.shape[-1])

    # pass 1: running max / sum -> lse and O
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=acc, device=q.device)
    l = torch.zeros_like(m)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=acc, device=q.device)
    for j0 in range(0, Tk, BLOCK_K):
        s = _block_scores(q, k[..., j0:j0 + BLOCK_K, :], j0, is_causal, Tq, Tk, scale)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        alpha = torch.exp(m - m_safe)
        p = torch.exp(s - m_safe)
        l = l * alpha + p.sum(-1, keepdim=True)
        o = o * alpha + torch.matmul(p, v[..., j0:j0 + BLOCK_K, :])
        m = m_new
    empty = l == 0
    o = torch.where(empty, torch.zeros_like(o), o / torch.where(empty, torch.ones_like(l), l))
    # like the FA2 kernels: +inf lse on empty rows so that exp(s - lse) = 0 there
    lse = torch.where(empty, torch.full_like(l, float("inf")), m + torch.log(torch.where(empty, torch.ones_like(l), l)))
    delta = (do * o).sum(-1, keepdim=True)

    # pass 2: per key block gradients
    dq = torch.zeros_like(q)
    dk_blocks, dv_blocks = [], []
    for j0 in range(0, Tk, BLOCK_K):
        kb, vb = k[..., j0:j0 + BLOCK_K, :], v[..., j0:j0 + BLOCK_K, :]
        s = _block_scores(q, kb, j0, is_causal, Tq, Tk, scale)
        p = torch.exp(s - lse)
        dv_blocks.append(torch.matmul(p.transpose(-1, -2), do))
        dp = torch.matmul(do, vb.transpose(-1, -2))
        ds = p * (dp - delta)
        dq += torch.matmul(ds, kb) * scale
        dk_blocks.append(torch.matmul(ds.transpose(-1, -2), q) * scale)
    dk = torch.cat(dk_blocks, dim=-2) if dk_blocks else torch.zeros_like(k)
    dv = torch.cat(dv_blocks, dim=-2) if dv_blocks else torch.zeros_like(v)
    return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)
