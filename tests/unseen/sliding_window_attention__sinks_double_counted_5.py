"""BUG: the first num_sinks keys are always prepended to the window slice, even when the window slice already contains them, so a sink inside the window gets twice its weight; differs when num_sinks > 0 and a query's window reaches key 0 (e.g. early queries, window=3, num_sinks=2).
STAGE: the weights
STYLE: StreamingLLM (attention-sinks) port: torch.cat([sink_kv, window_kv]) with separate masks for each part
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError("bad window / num_sinks / block_size")
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    off = Tk - Tq
    dev = queries.device
    ns = min(num_sinks, Tk)
    sink_k, sink_v = keys[..., :ns, :], values[..., :ns, :]
    outs = []
    for qs in range(0, Tq, block_size):
        qe = min(qs + block_size, Tq)
        q = queries[..., qs:qe, :]
        pos = (torch.arange(qs, qe, device=dev) + off)[:, None]
        lo = max(0, qs + off - window + 1)
        hi = max(lo, min(Tk, qe + off))
        win_k, win_v = keys[..., lo:hi, :], values[..., lo:hi, :]
        sink_j = torch.arange(ns, device=dev)[None, :]
        win_j = torch.arange(lo, hi, device=dev)[None, :]
        sink_ok = sink_j <= pos
        win_ok = (win_j <= pos) & (win_j > pos - window)
        k = torch.cat([sink_k, win_k], dim=-2)
        v = torch.cat([sink_v, win_v], dim=-2)
        ok = torch.cat([sink_ok, win_ok], dim=-1)
        if k.shape[-2] == 0:
            outs.append(torch.zeros(q.shape[:-1] + values.shape[-1:], dtype=q.dtype, device=dev))
            continue
        s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        s = s.masked_fill(~ok, float("-inf"))
        w = torch.softmax(s, dim=-1)
        w = torch.where(ok.any(-1, keepdim=True), w, torch.zeros_like(w))
        outs.append(w @ v)
    return torch.cat(outs, dim=-2)
