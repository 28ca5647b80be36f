"""STYLE: early fused-attention kernels (running max kept on the raw q.k, softmax scale folded into the exponent) ported to torch
BUG: The returned lse is m + log(l) with m the running max of the unscaled scores, so it misses the 1/sqrt(d) factor on the max (should be m * scale + log(l)).
STAGE: lse
WHEN: Every row whose max raw score is nonzero, with d > 1 (the output itself is right).
"""
import torch


class _RowState:
    def __init__(self, shape, dv, dtype, device):
        self.m = torch.full(shape, float("-inf"), dtype=dtype, device=device)
        self.l = torch.zeros(shape, dtype=dtype, device=device)
        self.acc = torch.zeros(*shape, dv, dtype=dtype, device=device)

    def update(self, qk, v, scale):
        m_new = torch.maximum(self.m, qk.amax(-1))
        m_ref = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp((qk - m_ref[..., None]) * scale)
        corr = torch.exp((self.m - m_ref) * scale)
        self.l = self.l * corr + p.sum(-1)
        self.acc = self.acc * corr[..., None] + p @ v
        self.m = m_new

    def finish(self):
        empty = self.l == 0
        l_safe = torch.where(empty, torch.ones_like(self.l), self.l)
        out = self.acc / l_safe[..., None]
        lse = torch.where(empty, torch.full_like(self.m, float("-inf")), self.m + torch.log(l_safe))
        return out, lse


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block_q and block_k must be >= 1")
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    scale = 1.0 / d ** 0.5
    dtype = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    diag = Tk - Tq
    outs, lses = [], []
    for qs in range(0, Tq, block_q):
        q = queries[..., qs:qs + block_q, :].to(dtype)
        rows = torch.arange(qs, qs + q.shape[-2], device=q.device)
        st = _RowState(q.shape[:-1], values.shape[-1], dtype, q.device)
        stop = max(0, min(Tk, qs + q.shape[-2] + diag)) if is_causal else Tk
        for ks in range(0, stop, block_k):
            k = keys[..., ks:ks + block_k, :].to(dtype)
            v = values[..., ks:ks + block_k, :].to(dtype)
            qk = q @ k.transpose(-2, -1)
            if is_causal:
                cols = torch.arange(ks, ks + k.shape[-2], device=q.device)
                qk = qk.masked_fill(cols[None, :] > rows[:, None] + diag, float("-inf"))
            st.update(qk, v, scale)
        o, lse = st.finish()
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs, dim=-2).to(queries.dtype), torch.cat(lses, dim=-1).to(queries.dtype)
