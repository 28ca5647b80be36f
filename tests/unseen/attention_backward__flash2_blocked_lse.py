"""BUG: none
STYLE: FlashAttention-2 style: a blocked online-softmax forward that keeps only the logsumexp, then a blocked backward (outer loop over key blocks) that recomputes P = exp(S - lse) and uses D = rowsum(dO * O).
"""
import math

import torch

BLOCK_Q = 32
BLOCK_K = 32


def _causal_block_mask(q_start, q_stop, k_start, k_stop, offset, device):
    rows = torch.arange(q_start, q_stop, device=device)[:, None]
    cols = torch.arange(k_start, k_stop, device=device)[None, :]
    return cols <= rows + offset


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    block_q, block_k = BLOCK_Q, BLOCK_K
    dtype = queries.dtype
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    q = queries.to(acc)
    k = keys.to(acc)
    v = values.to(acc)
    do = grad_output.to(acc)

    Tq, Tk = q.shape[-2], k.shape[-2]
    softmax_scale = q.shape[-1] ** -0.5
    offset = Tk - Tq  # bottom-right aligned causal rule
    lead = q.shape[:-2]

    # ---- forward: O and lse, streaming over key blocks ----
    o = q.new_zeros(*lead, Tq, v.shape[-1])
    lse = q.new_empty(*lead, Tq)
    for i in range(0, Tq, block_q):
        i2 = min(i + block_q, Tq)
        qi = q[..., i:i2, :]
        m_i = q.new_full((*lead, i2 - i), float("-inf"))
        l_i = q.new_zeros(*lead, i2 - i)
        acc_o = q.new_zeros(*lead, i2 - i, v.shape[-1])
        for j in range(0, Tk, block_k):
            j2 = min(j + block_k, Tk)
            if is_causal and j > i2 - 1 + offset:
                break
            s = (qi @ k[..., j:j2, :].transpose(-1, -2)) * softmax_scale
            if is_causal:
                s = s.masked_fill(~_causal_block_mask(i, i2, j, j2, offset, q.device), float("-inf"))
            m_new = torch.maximum(m_i, s.amax(dim=-1))
            m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - m_safe[..., None])
            alpha = torch.exp(m_i - m_safe)
            l_i = l_i * alpha + p.sum(dim=-1)
            acc_o = acc_o * alpha[..., None] + p @ v[..., j:j2, :]
            m_i = m_new
        empty = l_i == 0
        l_safe = torch.where(empty, torch.ones_like(l_i), l_i)
        o[..., i:i2, :] = acc_o / l_safe[..., None]
        m_safe = torch.where(torch.isinf(m_i), torch.zeros_like(m_i), m_i)
        lse[..., i:i2] = torch.where(empty, torch.full_like(l_i, float("inf")), m_safe + torch.log(l_safe))

    # ---- backward ----
    delta = (do * o).sum(dim=-1)  # D_i = rowsum(dO_i * O_i)
    dq = torch.zeros_like(q)
    dk = torch.zeros_like(k)
    dv = torch.zeros_like(v)
    for j in range(0, Tk, block_k):
        j2 = min(j + block_k, Tk)
        kj, vj = k[..., j:j2, :], v[..., j:j2, :]
        dk_j = torch.zeros_like(kj)
        dv_j = torch.zeros_like(vj)
        for i in range(0, Tq, block_q):
            i2 = min(i + block_q, Tq)
            if is_causal and j > i2 - 1 + offset:
                continue
            qi, doi = q[..., i:i2, :], do[..., i:i2, :]
            s = (qi @ kj.transpose(-1, -2)) * softmax_scale
            # an empty row has lse = +inf, so exp(s - lse) = 0 there
            p = torch.exp(s - lse[..., i:i2, None])
            if is_causal:
                p = p.masked_fill(~_causal_block_mask(i, i2, j, j2, offset, q.device), 0.0)
            dv_j += p.transpose(-1, -2) @ doi
            dp = doi @ vj.transpose(-1, -2)
            ds = p * (dp - delta[..., i:i2, None])
            dq[..., i:i2, :] += (ds @ kj) * softmax_scale
            dk_j += (ds.transpose(-1, -2) @ qi) * softmax_scale
        dk[..., j:j2, :] = dk_j
        dv[..., j:j2, :] = dv_j

    return dq.to(dtype), dk.to(dtype), dv.to(dtype)
