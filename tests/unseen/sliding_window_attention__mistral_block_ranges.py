"""BUG: none
STYLE: each query block reads its contiguous key range plus the sinks before it (Mistral)
"""
"""Sliding-window attention with attention sinks, query block by query block.

Each block of queries reads the contiguous key range its rows can see (Mistral's rolling window)
plus the sink keys that lie before that range (StreamingLLM), so a sink inside the range is read
once.
"""
import math

import torch


def _int_arg(name, value, low):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def _softmax_rows(scores, allowed):
    neg = torch.finfo(scores.dtype).min
    scores = scores.masked_fill(~allowed, neg)
    mx = scores.amax(-1, keepdim=True)
    e = torch.exp(scores - mx) * allowed
    den = e.sum(-1, keepdim=True)
    return e / den.clamp_min(torch.finfo(scores.dtype).tiny)


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    window = _int_arg("window", window, 1)
    num_sinks = _int_arg("num_sinks", num_sinks, 0)
    block_size = _int_arg("block_size", block_size, 1)
    Tq, d = queries.shape[-2:]
    Tk, dv = keys.shape[-2], values.shape[-1]
    shift = Tk - Tq
    scale = 1.0 / math.sqrt(d)
    out = queries.new_zeros(*queries.shape[:-1], dv)
    for i0 in range(0, Tq, block_size):
        i1 = min(i0 + block_size, Tq)
        p_first, p_last = i0 + shift, i1 - 1 + shift
        if p_last < 0:
            continue  # no row of this block has any key
        lo = max(0, p_first - window + 1)
        hi = min(Tk, p_last + 1)
        n_s = min(num_sinks, lo)  # sinks before the window range
        idx = torch.cat([torch.arange(n_s, device=queries.device),
                         torch.arange(lo, hi, device=queries.device)])
        if n_s:
            k_blk = torch.cat([keys[..., :n_s, :], keys[..., lo:hi, :]], dim=-2)
            v_blk = torch.cat([values[..., :n_s, :], values[..., lo:hi, :]], dim=-2)
        else:
            k_blk, v_blk = keys[..., lo:hi, :], values[..., lo:hi, :]
        pos = torch.arange(i0, i1, device=queries.device)[:, None] + shift
        j = idx[None, :]
        allowed = (j <= pos) & ((j > pos - window) | (j < num_sinks))
        s = (queries[..., i0:i1, :] @ k_blk.transpose(-1, -2)) * scale
        w = _softmax_rows(s, allowed)
        out[..., i0:i1, :] = w @ v_blk
    return out
