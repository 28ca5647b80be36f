"""STYLE: FlashAttention-1 paper pseudocode (Tr = Tq / Br, Tc = Tk / Bc tiles) in PyTorch
BUG: the number of key tiles is Tk // block_k, so a partial last key block is never visited.
STAGE: block scores
WHEN: Tk > block_k and Tk not a multiple of block_k
"""
import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError(f"invalid block sizes ({block_q}, {block_k})")
    N_q, d = queries.shape[-2], queries.shape[-1]
    N_k, d_v = keys.shape[-2], values.shape[-1]
    Br, Bc = block_q, block_k
    Tr = (N_q + Br - 1) // Br
    Tc = max(N_k // Bc, 1)
    tau = d ** -0.5
    ft = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    off = N_k - N_q

    O_list, L_list = [], []
    for i in range(Tr):
        Qi = queries[..., i * Br:(i + 1) * Br, :].to(ft)
        rows = Qi.shape[-2]
        qi_pos = torch.arange(i * Br, i * Br + rows, device=Qi.device)
        Oi = torch.zeros(*Qi.shape[:-1], d_v, dtype=ft, device=Qi.device)
        li = torch.zeros(Qi.shape[:-1], dtype=ft, device=Qi.device)
        mi = torch.full(Qi.shape[:-1], float("-inf"), dtype=ft, device=Qi.device)
        for j in range(Tc):
            if is_causal and j * Bc > i * Br + rows - 1 + off:
                break
            Kj = keys[..., j * Bc:(j + 1) * Bc, :].to(ft)
            Vj = values[..., j * Bc:(j + 1) * Bc, :].to(ft)
            Sij = tau * (Qi @ Kj.transpose(-1, -2))
            if is_causal:
                kj_pos = torch.arange(j * Bc, j * Bc + Kj.shape[-2], device=Qi.device)
                Sij = Sij.masked_fill(kj_pos[None, :] > qi_pos[:, None] + off, float("-inf"))
            mij = torch.maximum(mi, Sij.amax(dim=-1))
            mref = torch.where(torch.isneginf(mij), torch.zeros_like(mij), mij)
            Pij = torch.exp(Sij - mref.unsqueeze(-1))
            corr = torch.exp(mi - mref)
            li = corr * li + Pij.sum(dim=-1)
            Oi = corr.unsqueeze(-1) * Oi + Pij @ Vj
            mi = mij
        empty = li == 0
        li_safe = torch.where(empty, torch.ones_like(li), li)
        O_list.append(Oi / li_safe.unsqueeze(-1))
        L_list.append(torch.where(empty, torch.full_like(mi, float("-inf")), mi + torch.log(li_safe)))
    return torch.cat(O_list, dim=-2).to(queries.dtype), torch.cat(L_list, dim=-1).to(queries.dtype)
