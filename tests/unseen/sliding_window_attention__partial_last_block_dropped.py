"""
BUG: the loop runs over Tq // block_size full query blocks only, so when block_size does not divide Tq the trailing partial block is never computed and its rows stay 0.
STAGE: the output of the last (partial) query block
Style: numbered block loop (n_blocks, blk * block_size) writing into a preallocated zero output; -inf mask with nan_to_num guard.
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError("window >= 1, num_sinks >= 0 and block_size >= 1 are required")
    if queries.shape[:-2] != keys.shape[:-2] or keys.shape[:-2] != values.shape[:-2] or queries.dim() > 4:
        raise ValueError("leading dims must match")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("shape mismatch")

    n_q, d = queries.shape[-2:]
    n_k, d_v = values.shape[-2:]
    off = n_k - n_q
    dev = queries.device
    cdt = torch.float64 if queries.dtype == torch.float64 else torch.float32
    out = queries.new_zeros(queries.shape[:-2] + (n_q, d_v))

    n_blocks = n_q // block_size
    for blk in range(n_blocks):
        q0 = blk * block_size
        q1 = q0 + block_size
        lo = max(q0 + off - window + 1, 0)
        hi = min(q1 + off, n_k)
        if hi <= 0:
            continue
        ns = min(num_sinks, lo)
        kpos = torch.cat([torch.arange(ns, device=dev), torch.arange(lo, hi, device=dev)])
        qpos = torch.arange(q0, q1, device=dev)[:, None] + off
        mask = (kpos <= qpos) & ((kpos > qpos - window) | (kpos < num_sinks))

        kb = torch.cat([keys[..., :ns, :], keys[..., lo:hi, :]], dim=-2).to(cdt)
        vb = torch.cat([values[..., :ns, :], values[..., lo:hi, :]], dim=-2).to(cdt)
        s = torch.matmul(queries[..., q0:q1, :].to(cdt), kb.transpose(-1, -2)) / math.sqrt(d)
        s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, dim=-1).masked_fill(~mask, 0.0)
        w = torch.nan_to_num(w, nan=0.0)
        out[..., q0:q1, :] = torch.matmul(w, vb).to(out.dtype)
    return out
