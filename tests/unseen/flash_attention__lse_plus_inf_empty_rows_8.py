"""BUG: the FA2 kernels' +inf lse on rows with no allowed key
STYLE: FA2 port
"""
"""FlashAttention-2 forward, following flash-attn's CUDA kernel epilogue.

Query-block outer loop, key-block inner loop with a running max / sum; the epilogue writes
lse = m + log(l), and for a row whose sum is 0 (no allowed key) it stores +inf, as
flash-attn's softmax_rescale_o / normalize_softmax_lse does (`lse = sum == 0 ? INFINITY : ...`).

BUG: the contract wants -inf there (the logsumexp of no terms); only rows with no allowed key
(causal with Tq > Tk) show it.
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block_q / block_k must be >= 1")
    lead = queries.shape[:-2]
    Tq, d = queries.shape[-2:]
    Tk, dv = keys.shape[-2], values.shape[-1]
    q = queries.reshape(-1, Tq, d)
    k = keys.reshape(-1, Tk, d)
    v = values.reshape(-1, Tk, dv)
    scale = d ** -0.5
    outs, lses = [], []
    for i0 in range(0, Tq, block_q):
        i1 = min(i0 + block_q, Tq)
        qi = q[:, i0:i1]
        row_max = torch.full(qi.shape[:-1], -math.inf, dtype=q.dtype, device=q.device)
        row_sum = torch.zeros_like(row_max)
        o = torch.zeros(*qi.shape[:-1], dv, dtype=q.dtype, device=q.device)
        qpos = torch.arange(i0, i1, device=q.device) + (Tk - Tq)
        for j0 in range(0, Tk, block_k):
            j1 = min(j0 + block_k, Tk)
            if is_causal and j0 > i1 - 1 + (Tk - Tq):
                break
            s = torch.einsum("bid,bjd->bij", qi, k[:, j0:j1]) * scale
            if is_causal:
                kpos = torch.arange(j0, j1, device=q.device)
                s = s.masked_fill(kpos[None, :] > qpos[:, None], -math.inf)
            new_max = torch.maximum(row_max, s.amax(-1))
            safe = torch.where(new_max == -math.inf, torch.zeros_like(new_max), new_max)
            p = torch.exp(s - safe[..., None])
            scale_old = torch.exp(row_max - safe)
            row_sum = row_sum * scale_old + p.sum(-1)
            o = o * scale_old[..., None] + torch.einsum("bij,bjd->bid", p, v[:, j0:j1])
            row_max = new_max
        empty = row_sum == 0
        denom = torch.where(empty, torch.ones_like(row_sum), row_sum)
        outs.append(o / denom[..., None])
        lses.append(torch.where(empty, torch.full_like(row_sum, math.inf), row_max + torch.log(denom)))
    return (torch.cat(outs, 1).reshape(*lead, Tq, dv), torch.cat(lses, 1).reshape(*lead, Tq))
