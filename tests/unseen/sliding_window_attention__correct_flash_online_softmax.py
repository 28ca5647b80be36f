"""
BUG: none
Style: FlashAttention-like: for each query block, walk key sub-blocks (sinks first, then the
band) of at most block_size keys, keeping a running max, running sum and unnormalised
accumulator (online softmax); the running max is treated as a constant for autograd.
"""
import math

import torch


def _chunks(lo, hi, step):
    c = lo
    while c < hi:
        yield c, min(c + step, hi)
        c += step


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    for _name, _n in (("window", window), ("num_sinks", num_sinks), ("block_size", block_size)):
        if isinstance(_n, bool) or not isinstance(_n, int):
            raise ValueError(f"{_name} must be an int, got {_n!r}")
    if window < 1:
        raise ValueError("window must be a positive integer")
    if num_sinks < 0:
        raise ValueError("num_sinks must be non-negative")
    if block_size < 1:
        raise ValueError("block_size must be a positive integer")
    if queries.shape[:-2] != keys.shape[:-2] or keys.shape[:-2] != values.shape[:-2]:
        raise ValueError("leading dimensions must agree")
    if queries.dim() not in (2, 3, 4):
        raise ValueError("expected 0, 1 or 2 leading dims")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("bad shapes")

    M, D = queries.shape[-2], queries.shape[-1]
    N, Dv = values.shape[-2], values.shape[-1]
    lead = queries.shape[:-2]
    off = N - M
    sm_scale = 1.0 / math.sqrt(D)
    acc_t = torch.float64 if queries.dtype == torch.float64 else torch.float32
    dev = queries.device

    blocks = []
    for m0 in range(0, M, block_size):
        m1 = min(m0 + block_size, M)
        q = queries[..., m0:m1, :].to(acc_t) * sm_scale
        qpos = (torch.arange(m0, m1, device=dev) + off)[:, None]
        band_lo = max(m0 + off - window + 1, 0)
        band_hi = min(m1 + off, N)
        sink_hi = min(num_sinks, band_lo)

        m_i = torch.full(lead + (m1 - m0, 1), float("-inf"), dtype=acc_t, device=dev)
        l_i = torch.zeros(lead + (m1 - m0, 1), dtype=acc_t, device=dev)
        acc = torch.zeros(lead + (m1 - m0, Dv), dtype=acc_t, device=dev)

        ranges = list(_chunks(0, sink_hi, block_size)) + list(_chunks(band_lo, band_hi, block_size))
        for n0, n1 in ranges:
            kpos = torch.arange(n0, n1, device=dev)[None, :]
            keep = (kpos <= qpos) & ((kpos > qpos - window) | (kpos < num_sinks))
            s = q @ keys[..., n0:n1, :].to(acc_t).transpose(-1, -2)
            s = s.masked_fill(~keep, float("-inf"))
            m_new = torch.maximum(m_i, s.amax(dim=-1, keepdim=True).detach())
            m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            alpha = torch.exp(m_i - m_use)
            p = torch.exp(s - m_use)
            l_i = l_i * alpha + p.sum(dim=-1, keepdim=True)
            acc = acc * alpha + p @ values[..., n0:n1, :].to(acc_t)
            m_i = m_new

        l_safe = torch.where(l_i > 0, l_i, torch.ones_like(l_i))
        blocks.append((acc / l_safe).to(queries.dtype))

    if not blocks:
        return queries.new_zeros(lead + (0, Dv))
    return torch.cat(blocks, dim=-2)
