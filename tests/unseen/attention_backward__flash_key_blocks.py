"""BUG: none
STYLE: tiled FlashAttention backward in PyTorch (like the reference in the flash-attn repo's tests): a forward pass over key blocks keeping the running max and log-sum-exp, then a loop over key blocks recomputing P from lse and accumulating dQ.
"""
import math
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False, block_k=3):
    dtype = queries.dtype
    cd = torch.promote_types(dtype, torch.float32)
    q, k, v, do = (t.to(cd) for t in (queries, keys, values, grad_output))
    Tq, Tk = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5
    rows = torch.arange(Tq, device=q.device)[:, None]

    def block_scores(j0, j1):
        s = torch.matmul(q, k[..., j0:j1, :].transpose(-1, -2)) * scale
        if is_causal:
            cols = torch.arange(j0, j1, device=q.device)[None, :]
            s = s.masked_fill(cols > rows + (Tk - Tq), float("-inf"))
        return s

    # forward: online softmax statistics and O
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=cd, device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=cd, device=q.device)
    for j0 in range(0, Tk, block_k):
        j1 = min(j0 + block_k, Tk)
        s = block_scores(j0, j1)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        alpha = torch.exp(m - m_safe)
        p = torch.exp(s - m_safe)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + torch.matmul(p, v[..., j0:j1, :])
        m = m_new
    empty = l == 0
    o = acc / torch.where(empty, torch.ones_like(l), l)
    lse = torch.where(empty, torch.full_like(l, float("inf")), m + torch.log(torch.where(empty, torch.ones_like(l), l)))

    # backward
    D = (do * o).sum(dim=-1, keepdim=True)
    dq = torch.zeros_like(q)
    dk_blocks, dv_blocks = [], []
    for j0 in range(0, Tk, block_k):
        j1 = min(j0 + block_k, Tk)
        p = torch.exp(block_scores(j0, j1) - lse)
        dv_blocks.append(torch.matmul(p.transpose(-1, -2), do))
        dp = torch.matmul(do, v[..., j0:j1, :].transpose(-1, -2))
        ds = p * (dp - D)
        dq = dq + torch.matmul(ds, k[..., j0:j1, :]) * scale
        dk_blocks.append(torch.matmul(ds.transpose(-1, -2), q) * scale)
    dk = torch.cat(dk_blocks, dim=-2)
    dv = torch.cat(dv_blocks, dim=-2)
    return dq.to(dtype), dk.to(dtype), dv.to(dtype)
