"""STYLE: FlashAttention-2 paper, Algorithm 1, transcribed line by line (Q_i, K_j, V_j, m_i^(j), l_i^(j), O_i^(j))
BUG: The final diag(l)^-1 rescale is applied to O inside the key loop (after every block) while O is still rescaled only by e^(m_old - m_new) next block, so earlier blocks lose their weight l_old.
STAGE: rescale
WHEN: Rows whose allowed keys span more than one key block (Tk > block_k, or causal with several visible blocks); lse is right.
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes B_r and B_c must be positive")
    N_q, d = queries.shape[-2], queries.shape[-1]
    N_k, d_v = keys.shape[-2], values.shape[-1]
    B_r, B_c = block_q, block_k
    T_r, T_c = math.ceil(N_q / B_r), math.ceil(N_k / B_c)
    tau = 1.0 / math.sqrt(d)
    dt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    dev = queries.device
    offset = N_k - N_q
    O_blocks, L_blocks = [], []
    # 3: for 1 <= i <= T_r do
    for i in range(T_r):
        # 4: load Q_i from HBM to on-chip SRAM
        Q_i = queries[..., i * B_r:(i + 1) * B_r, :].to(dt)
        rows = Q_i.shape[-2]
        r_idx = torch.arange(i * B_r, i * B_r + rows, device=dev)
        # 5: on chip, initialise O_i^(0) = 0, l_i^(0) = 0, m_i^(0) = -inf
        O_i = torch.zeros(*Q_i.shape[:-1], d_v, dtype=dt, device=dev)
        l_i = torch.zeros(Q_i.shape[:-1], dtype=dt, device=dev)
        m_i = torch.full(Q_i.shape[:-1], float("-inf"), dtype=dt, device=dev)
        # 6: for 1 <= j <= T_c do
        for j in range(T_c):
            # 7: load K_j, V_j from HBM to on-chip SRAM
            K_j = keys[..., j * B_c:(j + 1) * B_c, :].to(dt)
            V_j = values[..., j * B_c:(j + 1) * B_c, :].to(dt)
            # 8: on chip, compute S_i^(j) = Q_i K_j^T
            S_ij = tau * (Q_i @ K_j.transpose(-2, -1))
            if is_causal:
                c_idx = torch.arange(j * B_c, j * B_c + K_j.shape[-2], device=dev)
                S_ij = S_ij.masked_fill(c_idx[None, :] > r_idx[:, None] + offset, float("-inf"))
            # 9: on chip, compute m_i^(j) = max(m_i^(j-1), rowmax(S_i^(j))), P~_i^(j) = exp(S_i^(j) - m_i^(j)),
            #    l_i^(j) = e^(m_i^(j-1) - m_i^(j)) l_i^(j-1) + rowsum(P~_i^(j))
            m_new = torch.maximum(m_i, S_ij.amax(dim=-1))
            m_use = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
            P_ij = torch.exp(S_ij - m_use[..., None])
            scale_old = torch.exp(m_i - m_use)
            l_i = scale_old * l_i + P_ij.sum(dim=-1)
            # 10: on chip, compute O_i^(j) = diag(e^(m_i^(j-1) - m_i^(j))) O_i^(j-1) + P~_i^(j) V_j
            O_i = scale_old[..., None] * O_i + P_ij @ V_j
            # 12: on chip, compute O_i = diag(l_i^(T_c))^-1 O_i^(T_c)
            O_i = O_i / torch.where(l_i > 0, l_i, torch.ones_like(l_i))[..., None]
            m_i = m_new
        # 13: on chip, compute L_i = m_i^(T_c) + log(l_i^(T_c))
        L_i = torch.where(l_i > 0, m_i + torch.log(l_i), torch.full_like(m_i, float("-inf")))
        # 14-15: write O_i and L_i to HBM
        O_blocks.append(O_i)
        L_blocks.append(L_i)
    return torch.cat(O_blocks, dim=-2).to(queries.dtype), torch.cat(L_blocks, dim=-1).to(queries.dtype)
