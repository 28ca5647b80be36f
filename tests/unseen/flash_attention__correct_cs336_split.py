"""STYLE: Stanford CS336 assignment 2 FlashAttention-2 forward in PyTorch (torch.split tiles, O/l/m per tile, final L = m + log l)
BUG: none
STAGE: none
WHEN: never
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError(f"flash_attention: tile sizes must be >= 1, got B_q={block_q}, B_k={block_k}")
    N_q, d = queries.shape[-2], queries.shape[-1]
    N_k = keys.shape[-2]
    acc = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    scale = 1.0 / math.sqrt(d)
    neg_inf = float("-inf")
    dev = queries.device

    O_out, L_out = [], []
    for q_first, Q_i in zip(range(0, N_q, block_q), torch.split(queries, block_q, dim=-2)):
        Q_i = Q_i.to(acc)
        B_q = Q_i.shape[-2]
        O_i = torch.zeros(*Q_i.shape[:-1], values.shape[-1], dtype=acc, device=dev)
        l_i = torch.zeros(Q_i.shape[:-1], dtype=acc, device=dev)
        m_i = torch.full(Q_i.shape[:-1], neg_inf, dtype=acc, device=dev)
        # last key this tile can see, bottom-right aligned
        limit = q_first + B_q - 1 + (N_k - N_q) if is_causal else N_k - 1

        for k_first, (K_j, V_j) in zip(
            range(0, N_k, block_k), zip(torch.split(keys, block_k, dim=-2), torch.split(values, block_k, dim=-2))
        ):
            if k_first > limit:
                break
            K_j, V_j = K_j.to(acc), V_j.to(acc)
            S_ij = Q_i @ K_j.transpose(-1, -2) * scale
            if is_causal:
                q_idx = torch.arange(q_first, q_first + B_q, device=dev).unsqueeze(-1)
                k_idx = torch.arange(k_first, k_first + K_j.shape[-2], device=dev).unsqueeze(0)
                S_ij = S_ij.masked_fill(k_idx > q_idx + (N_k - N_q), neg_inf)

            m_prev = m_i
            m_i = torch.maximum(m_prev, S_ij.amax(dim=-1))
            # a row that has seen no allowed key yet keeps m = -inf; shift its exponent by 0 instead
            shift = torch.where(m_i > neg_inf, m_i, torch.zeros_like(m_i))
            P_tilde = torch.exp(S_ij - shift.unsqueeze(-1))
            decay = torch.exp(m_prev - shift)
            l_i = decay * l_i + P_tilde.sum(dim=-1)
            O_i = decay.unsqueeze(-1) * O_i + P_tilde @ V_j

        seen = l_i > 0
        l_div = torch.where(seen, l_i, torch.ones_like(l_i))
        O_out.append(O_i / l_div.unsqueeze(-1))
        L_out.append(torch.where(seen, m_i + torch.log(l_div), torch.full_like(m_i, neg_inf)))

    return torch.cat(O_out, dim=-2).to(queries.dtype), torch.cat(L_out, dim=-1).to(queries.dtype)
