"""Queries and keys reshaped with .view(-1, Tq, d): it fails on non-contiguous inputs (a transposed (B, T, H, d) tensor), which the contract allows.
BUG: queries and keys reshaped with .view(-1, Tq, d): it fails on non-contiguous inputs (a transposed (B, T, H, d) tensor), which the contract allows."""
import math
import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be >= 1")
    lead = queries.shape[:-2]
    queries = queries.view(-1, *queries.shape[-2:]).view(queries.shape)
    keys = keys.view(-1, *keys.shape[-2:]).view(keys.shape)
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    cdt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    dev = queries.device
    scale = 1.0 / math.sqrt(d)
    off = Tk - Tq
    outs, lses = [], []
    for qs in range(0, Tq, block_q):
        qb = queries[..., qs:qs + block_q, :].to(cdt)
        nq = qb.shape[-2]
        m = torch.full((*lead, nq), float("-inf"), dtype=cdt, device=dev)
        l = torch.zeros((*lead, nq), dtype=cdt, device=dev)
        acc = torch.zeros((*lead, nq, dv), dtype=cdt, device=dev)
        kend = Tk if not is_causal else max(0, min(Tk, qs + nq - 1 + off + 1))
        for ks in range(0, kend, block_k):
            kb = keys[..., ks:ks + block_k, :].to(cdt)
            vb = values[..., ks:ks + block_k, :].to(cdt)
            nk = kb.shape[-2]
            s = (qb @ kb.transpose(-1, -2)) * scale
            if is_causal:
                qi = torch.arange(qs, qs + nq, device=dev)[:, None] + off
                kj = torch.arange(ks, ks + nk, device=dev)[None, :]
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))
            m_safe = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - m_safe[..., None])
            alpha = torch.exp(m - m_safe)
            l = l * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ vb
            m = m_new
        m_safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
        out = acc / torch.where(l > 0, l, torch.ones_like(l))[..., None]
        lse = torch.where(l > 0, m_safe + torch.log(torch.where(l > 0, l, torch.ones_like(l))),
                          torch.full_like(l, float("-inf")))
        outs.append(out)
        lses.append(lse)
    if Tq == 0:
        return (torch.zeros((*lead, 0, dv), dtype=queries.dtype, device=dev),
                torch.zeros((*lead, 0), dtype=queries.dtype, device=dev))
    return torch.cat(outs, -2).to(queries.dtype), torch.cat(lses, -1).to(queries.dtype)
