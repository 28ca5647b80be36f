"""
BUG: the whole (Tq, Tk) boolean sliding-window mask is built up front and only sliced per block, so an allocation of Tq*Tk elements breaks the memory bound (values are right).
STAGE: memory (the precomputed full mask)
Style: "precompute the mask once, then tile" loop with index gathers and -inf fill plus a has-any-key guard.
"""
import math

import torch


def _sliding_window_mask(n_q, n_k, window, num_sinks, device):
    q_pos = torch.arange(n_q, device=device)[:, None] + (n_k - n_q)
    k_pos = torch.arange(n_k, device=device)[None, :]
    return (k_pos <= q_pos) & ((k_pos > q_pos - window) | (k_pos < num_sinks))


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1:
        raise ValueError("window must be >= 1")
    if num_sinks < 0:
        raise ValueError("num_sinks must be >= 0")
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    if queries.shape[:-2] != keys.shape[:-2] or keys.shape[:-2] != values.shape[:-2] or queries.dim() > 4:
        raise ValueError("leading dims must match")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("shape mismatch")

    n_q, d = queries.shape[-2:]
    n_k, d_v = values.shape[-2:]
    off = n_k - n_q
    dev = queries.device
    cdt = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    full_mask = _sliding_window_mask(n_q, n_k, window, num_sinks, dev)

    chunks = []
    for q0 in range(0, n_q, block_size):
        q1 = min(q0 + block_size, n_q)
        lo = max(q0 + off - window + 1, 0)
        hi = max(min(q1 + off, n_k), lo)
        cols = torch.cat([torch.arange(min(num_sinks, lo), device=dev), torch.arange(lo, hi, device=dev)])
        if cols.numel() == 0:
            chunks.append(queries.new_zeros(queries.shape[:-2] + (q1 - q0, d_v)))
            continue
        m = full_mask[q0:q1][:, cols]
        s = queries[..., q0:q1, :].to(cdt) @ keys[..., cols, :].to(cdt).transpose(-1, -2) / math.sqrt(d)
        p = torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1)
        p = torch.where(m.any(-1, keepdim=True), p, torch.zeros_like(p))
        chunks.append((p @ values[..., cols, :].to(cdt)).to(queries.dtype))
    if not chunks:
        return queries.new_zeros(queries.shape[:-2] + (0, d_v))
    return torch.cat(chunks, dim=-2)
