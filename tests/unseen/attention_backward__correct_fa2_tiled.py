"""STYLE: FlashAttention-2 backward algorithm in PyTorch (recompute P from the logsumexp, loop over key blocks, D = rowsum(dO * O))
BUG: none
STAGE: none
WHEN: never
"""
import torch


def _lse_and_out(q, k, v, scale, causal, shift, block):
    """Forward pass in key blocks: logsumexp per row and the normalised output."""
    Tq, Tk = q.shape[-2], k.shape[-2]
    m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    qi = torch.arange(Tq, device=q.device)[:, None]
    for k0 in range(0, Tk, block):
        kj = torch.arange(k0, min(k0 + block, Tk), device=q.device)[None, :]
        s = q @ k[..., k0:k0 + block, :].transpose(-2, -1) * scale
        if causal:
            s = s.masked_fill(kj > qi + shift, float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        ref = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp(s - ref[..., None])
        a = torch.exp(m - ref)
        l = l * a + p.sum(-1)
        acc = acc * a[..., None] + p @ v[..., k0:k0 + block, :]
        m = m_new
    empty = l == 0
    lse = torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(torch.where(empty, torch.ones_like(l), l)))
    out = acc / torch.where(empty, torch.ones_like(l), l)[..., None]
    return lse, out


BLOCK_K = 64


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    block = BLOCK_K
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    ct = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    q, k, v, do = queries.to(ct), keys.to(ct), values.to(ct), grad_output.to(ct)
    scale = d ** -0.5
    shift = Tk - Tq

    lse, out = _lse_and_out(q, k, v, scale, is_causal, shift, block)
    D = (do * out).sum(-1, keepdim=True)  # (..., Tq, 1)
    lse_safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))[..., None]
    qi = torch.arange(Tq, device=q.device)[:, None]

    dq = torch.zeros_like(q)
    dk_blocks, dv_blocks = [], []
    for k0 in range(0, Tk, block):
        kb, vb = k[..., k0:k0 + block, :], v[..., k0:k0 + block, :]
        s = q @ kb.transpose(-2, -1) * scale
        p = torch.exp(s - lse_safe)
        allowed = torch.isfinite(lse)[..., None]
        if is_causal:
            kj = torch.arange(k0, k0 + kb.shape[-2], device=q.device)[None, :]
            allowed = allowed & (kj <= qi + shift)
        p = torch.where(allowed, p, torch.zeros_like(p))
        dv_blocks.append(p.transpose(-2, -1) @ do)
        dp = do @ vb.transpose(-2, -1)
        ds = p * (dp - D) * scale
        dq = dq + ds @ kb
        dk_blocks.append(ds.transpose(-2, -1) @ q)

    dk = torch.cat(dk_blocks, dim=-2) if dk_blocks else torch.zeros_like(k)
    dv = torch.cat(dv_blocks, dim=-2) if dv_blocks else torch.zeros_like(v)
    return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)
