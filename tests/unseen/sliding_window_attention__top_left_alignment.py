"""
BUG: queries are aligned top-left (query i sits at position i) instead of bottom-right (i + Tk - Tq), so results are wrong whenever Tq != Tk.
STAGE: the query positions (alignment) used for the key band and mask
Style: FlashAttention-like online softmax over key sub-blocks inside each query block.
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1:
        raise ValueError("window must be a positive integer")
    if num_sinks < 0:
        raise ValueError("num_sinks must be non-negative")
    if block_size < 1:
        raise ValueError("block_size must be a positive integer")
    if queries.shape[:-2] != keys.shape[:-2] or keys.shape[:-2] != values.shape[:-2] or queries.dim() > 4:
        raise ValueError("leading dimensions must agree")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("bad shapes")

    M, D = queries.shape[-2], queries.shape[-1]
    N, Dv = values.shape[-2], values.shape[-1]
    lead = queries.shape[:-2]
    scale = 1.0 / math.sqrt(D)
    acc_t = torch.float64 if queries.dtype == torch.float64 else torch.float32
    dev = queries.device

    outs = []
    for m0 in range(0, M, block_size):
        m1 = min(m0 + block_size, M)
        q = queries[..., m0:m1, :].to(acc_t) * scale
        qpos = torch.arange(m0, m1, device=dev)[:, None]          # position of query i is i
        lo = max(m0 - window + 1, 0)
        hi = min(m1, N)
        sink_hi = min(num_sinks, lo, N)

        run_max = torch.full(lead + (m1 - m0, 1), float("-inf"), dtype=acc_t, device=dev)
        run_sum = torch.zeros(lead + (m1 - m0, 1), dtype=acc_t, device=dev)
        acc = torch.zeros(lead + (m1 - m0, Dv), dtype=acc_t, device=dev)
        starts = [(c, min(c + block_size, sink_hi)) for c in range(0, sink_hi, block_size)]
        starts += [(c, min(c + block_size, hi)) for c in range(lo, hi, block_size)]
        for n0, n1 in starts:
            kpos = torch.arange(n0, n1, device=dev)[None, :]
            keep = (kpos <= qpos) & ((kpos > qpos - window) | (kpos < num_sinks))
            s = (q @ keys[..., n0:n1, :].to(acc_t).transpose(-1, -2)).masked_fill(~keep, float("-inf"))
            new_max = torch.maximum(run_max, s.amax(-1, keepdim=True).detach())
            safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
            corr = torch.exp(run_max - safe)
            p = torch.exp(s - safe)
            run_sum = run_sum * corr + p.sum(-1, keepdim=True)
            acc = acc * corr + p @ values[..., n0:n1, :].to(acc_t)
            run_max = new_max
        outs.append((acc / torch.where(run_sum > 0, run_sum, torch.ones_like(run_sum))).to(queries.dtype))
    if not outs:
        return queries.new_zeros(lead + (0, Dv))
    return torch.cat(outs, dim=-2)
