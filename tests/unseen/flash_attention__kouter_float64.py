"""BUG: none
STYLE: FlashAttention-1 loop order (key/value blocks outer, query blocks inner) with the per-query-block running statistics kept in float64 lists and the output renormalised at every step (O_i <- (l_old e^{m_old-m_new} O_i + e^{-m_new} P V) / l_new), cast back at the end
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if int(block_q) < 1 or int(block_k) < 1:
        raise ValueError(f"block sizes must be positive, got {block_q}, {block_k}")
    *lead, Tq, d = queries.shape
    Tk, dv = keys.shape[-2], values.shape[-1]
    dev = queries.device
    f64 = torch.float64
    scale = 1.0 / math.sqrt(d)
    shift = Tk - Tq
    starts = list(range(0, Tq, block_q))
    O = [torch.zeros(*lead, min(Tq, s + block_q) - s, dv, dtype=f64, device=dev) for s in starts]
    L = [torch.zeros(*lead, min(Tq, s + block_q) - s, dtype=f64, device=dev) for s in starts]
    M = [torch.full((*lead, min(Tq, s + block_q) - s), -math.inf, dtype=f64, device=dev) for s in starts]
    for j0 in range(0, Tk, block_k):
        j1 = min(Tk, j0 + block_k)
        Kj = keys[..., j0:j1, :].to(f64)
        Vj = values[..., j0:j1, :].to(f64)
        for n, i0 in enumerate(starts):
            i1 = min(Tq, i0 + block_q)
            if is_causal and j0 > i1 - 1 + shift:
                continue                                  # no query of this block sees these keys
            S = (queries[..., i0:i1, :].to(f64) @ Kj.transpose(-2, -1)) * scale
            if is_causal:
                rows = torch.arange(i0, i1, device=dev)[:, None]
                cols = torch.arange(j0, j1, device=dev)[None, :]
                S = torch.where(cols <= rows + shift, S, torch.tensor(-math.inf, dtype=f64, device=dev))
            m_tile = S.detach().amax(-1)
            m_new = torch.maximum(M[n], m_tile)
            m_ref = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
            P = torch.exp(S - m_ref[..., None])
            l_new = torch.exp(M[n] - m_ref) * L[n] + P.sum(-1)
            l_div = torch.where(l_new > 0, l_new, torch.ones_like(l_new))
            O[n] = ((torch.exp(M[n] - m_ref) * L[n])[..., None] * O[n] + P @ Vj) / l_div[..., None]
            L[n], M[n] = l_new, m_new
    out = torch.cat(O, dim=-2).to(queries.dtype)
    with torch.no_grad():
        lse = []
        for m, l in zip(M, L):
            ok = l > 0
            lse.append(torch.where(ok, m + torch.log(torch.where(ok, l, torch.ones_like(l))),
                                   torch.full_like(l, -math.inf)))
        lse = torch.cat(lse, dim=-1).to(queries.dtype)
    return out, lse
