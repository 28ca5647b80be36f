"""BUG: copying FlashAttention-2's kernels, a row with no allowed key stores lse = +inf instead of -inf (outputs are right: 0 on those rows).
STAGE: the lse
"""
import math

import torch

_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be >= 1")
    lead = queries.shape[:-2]
    Tq, D = queries.shape[-2:]
    Tk, Dv = keys.shape[-2], values.shape[-1]
    dt = queries.dtype
    acc_t = torch.float32 if dt in (torch.float16, torch.bfloat16) else dt
    q = queries.reshape(-1, Tq, D)
    k = keys.reshape(-1, Tk, D)
    v = values.reshape(-1, Tk, Dv)
    BH = q.shape[0]
    qk_scale = _LOG2E / math.sqrt(D)
    delta = Tk - Tq
    dev = queries.device

    o_list, lse_list = [], []
    for start_m in range(0, Tq, block_q):
        end_m = min(start_m + block_q, Tq)
        q_tile = q[:, start_m:end_m].to(acc_t)
        m_i = torch.full((BH, end_m - start_m), -float("inf"), dtype=acc_t, device=dev)
        l_i = torch.zeros((BH, end_m - start_m), dtype=acc_t, device=dev)
        acc = torch.zeros((BH, end_m - start_m, Dv), dtype=acc_t, device=dev)
        hi = Tk if not is_causal else max(0, min(Tk, end_m + delta))
        offs_m = torch.arange(start_m, end_m, device=dev)
        for start_n in range(0, hi, block_k):
            end_n = min(start_n + block_k, Tk)
            qk = torch.bmm(q_tile, k[:, start_n:end_n].to(acc_t).transpose(1, 2)) * qk_scale
            if is_causal:
                offs_n = torch.arange(start_n, end_n, device=dev)
                qk = torch.where(offs_m[:, None] + delta >= offs_n[None, :], qk, torch.tensor(-float("inf"), dtype=acc_t, device=dev))
            m_ij = torch.maximum(m_i, qk.detach().amax(-1))
            m_sub = torch.where(m_ij == -float("inf"), torch.zeros_like(m_ij), m_ij)
            p = torch.exp2(qk - m_sub[:, :, None])
            alpha = torch.exp2(m_i - m_sub)
            l_i = l_i * alpha + p.sum(-1)
            acc = acc * alpha[:, :, None] + torch.bmm(p, v[:, start_n:end_n].to(acc_t))
            m_i = m_ij
        seen = l_i > 0
        l_div = torch.where(seen, l_i, torch.ones_like(l_i))
        o_list.append(acc / l_div[:, :, None])
        lse_list.append(torch.where(seen, (m_i + torch.log2(l_div)) * _LN2, torch.full_like(l_i, float("inf"))))
    out = torch.cat(o_list, dim=1).reshape(*lead, Tq, Dv).to(dt)
    lse = torch.cat(lse_list, dim=1).reshape(*lead, Tq).to(dt)
    return out, lse
