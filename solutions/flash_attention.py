"""Reference: the FlashAttention forward pass, tiled with an online softmax."""
import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    """queries (..., Tq, d), keys (..., Tk, d), values (..., Tk, dv) -> output (..., Tq, dv), lse (..., Tq).
    Causal: key j is allowed for query i when j <= i + (Tk - Tq). No tensor larger than one block's scores
    (..., block_q, block_k), an input or an output is ever built."""
    if block_q < 1 or block_k < 1:
        raise ValueError(f"flash_attention: block_q = {block_q} and block_k = {block_k} must both be at least 1")
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk, dv = keys.shape[-2], values.shape[-1]
    scale = d ** -0.5
    work = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    shift = Tk - Tq  # bottom-right alignment
    outs, lses = [], []
    for q0 in range(0, Tq, block_q):
        q = queries[..., q0:q0 + block_q, :].to(work)  # (..., bq, d), the last block may be partial
        bq = q.shape[-2]
        q_pos = torch.arange(q0, q0 + bq, device=queries.device)
        m = torch.full(q.shape[:-1], float("-inf"), dtype=work, device=queries.device)  # running max (..., bq)
        l = torch.zeros_like(m)  # running sum of exp(s - m)
        acc = torch.zeros(*q.shape[:-1], dv, dtype=work, device=queries.device)  # (..., bq, dv)
        k_end = min(Tk, q0 + bq + shift) if is_causal else Tk  # causal: later key blocks are all masked
        for k0 in range(0, max(k_end, 0), block_k):
            k = keys[..., k0:k0 + block_k, :].to(work)
            v = values[..., k0:k0 + block_k, :].to(work)
            s = (q @ k.transpose(-2, -1)) * scale  # (..., bq, bk)
            if is_causal:
                k_pos = torch.arange(k0, k0 + k.shape[-2], device=queries.device)
                allowed = k_pos[None, :] <= q_pos[:, None] + shift  # this block's part of the causal mask
                s = s.masked_fill(~allowed, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))
            m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # rows with no key yet
            p = torch.exp(s - m_safe[..., None])
            alpha = torch.exp(m - m_safe)  # rescales what was summed under the old max
            l = l * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ v
            m = m_new
        empty = l == 0  # rows with no allowed key: output 0, lse -inf
        outs.append(acc / torch.where(empty, torch.ones_like(l), l)[..., None])
        lses.append(torch.where(empty, torch.full_like(m, float("-inf")), m + torch.log(l)))
    return torch.cat(outs, dim=-2).to(queries.dtype), torch.cat(lses, dim=-1).to(queries.dtype)
