"""STYLE: port of the FlashAttention-2 CUDA epilogue (lse = +inf when row_sum is 0 or NaN) to a PyTorch tiled loop
BUG: a row with no allowed key gets lse = +inf (the CUDA kernel's convention) instead of -inf.
STAGE: lse
WHEN: is_causal with Tq > Tk (rows with no allowed key); everything else is right
"""
import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("flash_attention: block_q and block_k must be >= 1")
    Tq, D = queries.shape[-2], queries.shape[-1]
    Tk = keys.shape[-2]
    cdtype = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    scale = D ** -0.5
    diag = Tk - Tq
    device = queries.device

    o_chunks, lse_chunks = [], []
    for q_start in range(0, Tq, block_q):
        q = queries[..., q_start:q_start + block_q, :].to(cdtype)
        n_rows = q.shape[-2]
        rows = torch.arange(q_start, q_start + n_rows, device=device)
        k_stop = max(0, min(Tk, q_start + n_rows + diag)) if is_causal else Tk

        m = torch.full(q.shape[:-1], float("-inf"), dtype=cdtype, device=device)
        s_sum = torch.zeros_like(m)
        o = torch.zeros(*q.shape[:-1], values.shape[-1], dtype=cdtype, device=device)
        for k_start in range(0, k_stop, block_k):
            k = keys[..., k_start:k_start + block_k, :].to(cdtype)
            v = values[..., k_start:k_start + block_k, :].to(cdtype)
            s = torch.einsum("...qd,...kd->...qk", q, k) * scale
            if is_causal:
                cols = torch.arange(k_start, k_start + k.shape[-2], device=device)
                s = torch.where(cols[None, :] <= rows[:, None] + diag, s, torch.full_like(s, float("-inf")))
            m_next = torch.maximum(m, s.amax(-1))
            m_scaled = torch.where(m_next == float("-inf"), torch.zeros_like(m_next), m_next)
            p = torch.exp(s - m_scaled[..., None])
            r = torch.exp(m - m_scaled)
            s_sum = s_sum * r + p.sum(-1)
            o = o * r[..., None] + torch.einsum("...qk,...kd->...qd", p, v)
            m = m_next

        zero_or_nan = (s_sum == 0) | (s_sum != s_sum)
        inv_sum = torch.where(zero_or_nan, torch.ones_like(s_sum), 1.0 / s_sum)
        o_chunks.append(o * inv_sum[..., None])
        lse_chunks.append(
            torch.where(zero_or_nan, torch.full_like(m, float("inf")), m + torch.log(torch.where(zero_or_nan, torch.ones_like(s_sum), s_sum)))
        )
    return torch.cat(o_chunks, -2).to(queries.dtype), torch.cat(lse_chunks, -1).to(queries.dtype)
