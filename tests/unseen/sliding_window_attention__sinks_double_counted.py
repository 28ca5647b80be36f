"""
BUG: the first num_sinks keys always get their own score tile next to the block's window band (StreamingLLM-style [sinks | window]) even when they also lie inside the band, so a sink inside the window is counted twice in the softmax.
STAGE: the key set of each block (sinks that are also in the window)
Style: separate sink and window score tiles with their own masks, concatenated for the softmax, finfo.min masking.
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError("invalid window / num_sinks / block_size")
    if not (queries.shape[:-2] == keys.shape[:-2] == values.shape[:-2]) or queries.dim() > 4:
        raise ValueError("leading dims must match")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("shape mismatch")

    T_q, T_k = queries.shape[-2], keys.shape[-2]
    d, d_v = queries.shape[-1], values.shape[-1]
    shift = T_k - T_q
    dev = queries.device
    cdt = torch.float64 if queries.dtype == torch.float64 else torch.float32
    very_neg = torch.finfo(cdt).min
    n_sink = min(num_sinks, T_k)
    sink_pos = torch.arange(n_sink, device=dev)
    k_sink = keys[..., :n_sink, :].to(cdt)
    v_sink = values[..., :n_sink, :].to(cdt)

    result = queries.new_zeros(queries.shape[:-2] + (T_q, d_v))
    for a in range(0, T_q, block_size):
        b = min(a + block_size, T_q)
        qpos = torch.arange(a, b, device=dev) + shift
        lo = max(a + shift - window + 1, 0)
        hi = min(b + shift, T_k)
        if hi <= 0:
            continue
        win_pos = torch.arange(lo, hi, device=dev)
        q_blk = queries[..., a:b, :].to(cdt) / math.sqrt(d)

        sink_ok = sink_pos[None, :] <= qpos[:, None]
        win_ok = (win_pos[None, :] <= qpos[:, None]) & (win_pos[None, :] > qpos[:, None] - window)
        ok = torch.cat([sink_ok, win_ok], dim=-1)

        sc = torch.cat([q_blk @ k_sink.transpose(-1, -2),
                        q_blk @ keys[..., lo:hi, :].to(cdt).transpose(-1, -2)], dim=-1)
        sc = sc.masked_fill(~ok, very_neg)
        pr = torch.softmax(sc, dim=-1) * ok.any(-1, keepdim=True)
        o = pr[..., :n_sink] @ v_sink + pr[..., n_sink:] @ values[..., lo:hi, :].to(cdt)
        result[..., a:b, :] = o.to(result.dtype)
    return result
