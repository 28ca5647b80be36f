"""STYLE: CS336-style FlashAttention-2 forward written with explicit per-tile statistics (m, l, O)
BUG: when the running max grows, the old accumulators are multiplied by exp(m_new - m_old) instead of exp(m_old - m_new).
STAGE: rescale
WHEN: more than one key block and the row max increases in a later block (almost always when Tk > block_k)
"""
import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block_q={block_q}, block_k={block_k}: both must be >= 1")
    Nq, d = queries.shape[-2:]
    Nk = keys.shape[-2]
    scale = d ** -0.5
    dt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    offset = Nk - Nq
    O_tiles, L_tiles = [], []

    for i in range(0, Nq, block_q):
        Q_i = queries[..., i:i + block_q, :].to(dt)
        Bq = Q_i.shape[-2]
        O_i = Q_i.new_zeros(*Q_i.shape[:-1], values.shape[-1])
        l_i = Q_i.new_zeros(Q_i.shape[:-1])
        m_i = Q_i.new_full(Q_i.shape[:-1], float("-inf"))
        q_idx = torch.arange(i, i + Bq, device=queries.device)

        for j in range(0, Nk, block_k):
            if is_causal and j > i + Bq - 1 + offset:
                break
            K_j = keys[..., j:j + block_k, :].to(dt)
            V_j = values[..., j:j + block_k, :].to(dt)
            S_ij = Q_i @ K_j.transpose(-2, -1) * scale
            if is_causal:
                k_idx = torch.arange(j, j + K_j.shape[-2], device=queries.device)
                S_ij = torch.where(k_idx[None, :] <= q_idx[:, None] + offset, S_ij, float("-inf"))
            m_new = torch.maximum(m_i, S_ij.max(dim=-1).values)
            m_ref = torch.nan_to_num(m_new, neginf=0.0)
            P_ij = torch.exp(S_ij - m_ref[..., None])
            rescale = torch.exp(m_ref - m_i)
            rescale = torch.where(torch.isfinite(m_i), rescale, torch.zeros_like(rescale))
            l_i = rescale * l_i + P_ij.sum(dim=-1)
            O_i = rescale[..., None] * O_i + P_ij @ V_j
            m_i = m_new

        denom = torch.where(l_i > 0, l_i, torch.ones_like(l_i))
        O_tiles.append(O_i / denom[..., None])
        L_tiles.append(torch.where(l_i > 0, m_i + torch.log(denom), torch.full_like(m_i, float("-inf"))))

    return torch.cat(O_tiles, dim=-2).to(queries.dtype), torch.cat(L_tiles, dim=-1).to(queries.dtype)
