"""BUG: none
STYLE: base-2 exponentials as Triton kernels use them (scores times log2(e)), FlashAttention-1's normalised accumulator, the running max detached.
"""
import math
import torch

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    """Triton-tutorial flavour: exp2 with log2(e) folded into the scale, FA1 normalised accumulator."""
    if not (block_q >= 1 and block_k >= 1):
        raise ValueError(f"bad blocks {block_q}, {block_k}")
    tq, d = queries.shape[-2], queries.shape[-1]
    tk = keys.shape[-2]
    cdt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    qk_scale = LOG2E / math.sqrt(d)
    neg_inf = torch.tensor(float("-inf"), dtype=cdt, device=queries.device)
    zero = torch.tensor(0.0, dtype=cdt, device=queries.device)
    o_blocks, lse_blocks = [], []
    for start_m in range(0, tq, block_q):
        end_m = min(start_m + block_q, tq)
        q = queries[..., start_m:end_m, :].to(cdt)
        offs_m = torch.arange(start_m, end_m, device=queries.device)
        m_i = l_i = o = None
        hi = tk
        if is_causal:
            hi = min(tk, max(0, end_m + tk - tq))
        for start_n in range(0, hi, block_k):
            end_n = min(start_n + block_k, tk)
            k = keys[..., start_n:end_n, :].to(cdt)
            v = values[..., start_n:end_n, :].to(cdt)
            qk = torch.einsum("...md,...nd->...mn", q, k) * qk_scale
            if is_causal:
                offs_n = torch.arange(start_n, end_n, device=queries.device)
                keep = offs_n[None, :] <= (offs_m[:, None] + (tk - tq))
                qk = torch.where(keep, qk, neg_inf)
            blk_max = qk.amax(-1).detach()
            m_new = blk_max if m_i is None else torch.maximum(m_i, blk_max)
            m_use = torch.where(m_new == neg_inf, zero, m_new)
            p = torch.exp2(qk - m_use[..., None])
            l_blk = p.sum(-1)
            pv = torch.einsum("...mn,...nv->...mv", p, v)
            if m_i is None:
                l_new = l_blk
                o_new = pv / torch.where(l_new > 0, l_new, 1.0)[..., None]
            else:
                alpha = torch.exp2(m_i - m_use)
                l_scaled = l_i * alpha
                l_new = l_scaled + l_blk
                denom = torch.where(l_new > 0, l_new, 1.0)[..., None]
                o_new = (o * l_scaled[..., None] + pv) / denom
            m_i, l_i, o = m_new, l_new, o_new
        n_rows = end_m - start_m
        if o is None:  # no key block seen at all
            o = torch.zeros((*queries.shape[:-2], n_rows, values.shape[-1]), dtype=cdt, device=queries.device)
            lse = torch.full((*queries.shape[:-2], n_rows), float("-inf"), dtype=cdt, device=queries.device)
        else:
            lse = torch.where(l_i > 0, m_i * LN2 + torch.log(torch.where(l_i > 0, l_i, 1.0)), neg_inf)
        o_blocks.append(o)
        lse_blocks.append(lse)
    return torch.cat(o_blocks, -2).to(queries.dtype), torch.cat(lse_blocks, -1).to(queries.dtype)
