"""
BUG: the 1/sqrt(d) scale is applied to the caller's queries in place (queries.mul_), so the input tensor is modified (and a leaf that requires grad raises a RuntimeError).
STAGE: the score scaling (applied in place to the input queries)
Style: pre-scaled queries, per-block band + sinks slices with explicit position mask, finfo.min fill and a row-validity factor.
"""
import math

import torch
import torch.nn.functional as F


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError("invalid window / num_sinks / block_size")
    if queries.dim() != keys.dim() or keys.dim() != values.dim() or queries.dim() > 4:
        raise ValueError("rank mismatch")
    if queries.shape[:-2] != keys.shape[:-2] or keys.shape[:-2] != values.shape[:-2]:
        raise ValueError("leading dims differ")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("incompatible shapes")

    Tq, Tk = queries.shape[-2], keys.shape[-2]
    dv = values.shape[-1]
    shift = Tk - Tq
    dev = queries.device
    acc = queries.dtype if queries.dtype == torch.float64 else torch.float32
    neg = torch.finfo(acc).min

    queries = queries.mul_(1.0 / math.sqrt(queries.shape[-1]))   # scale once, up front

    out = queries.new_zeros(queries.shape[:-2] + (Tq, dv))
    for s in range(0, Tq, block_size):
        e = min(s + block_size, Tq)
        lo = max(s + shift - window + 1, 0)
        hi = min(e + shift, Tk)
        if hi <= 0:
            continue
        ns = min(num_sinks, lo)
        kpos = torch.cat([torch.arange(ns, device=dev), torch.arange(lo, hi, device=dev)])
        qpos = torch.arange(s + shift, e + shift, device=dev)[:, None]
        ok = (kpos <= qpos) & ((kpos > qpos - window) | (kpos < num_sinks))

        kb = torch.cat([keys[..., :ns, :], keys[..., lo:hi, :]], -2).to(acc)
        vb = torch.cat([values[..., :ns, :], values[..., lo:hi, :]], -2).to(acc)
        logits = queries[..., s:e, :].to(acc) @ kb.transpose(-1, -2)
        logits = torch.where(ok, logits, torch.full_like(logits, neg))
        p = F.softmax(logits, dim=-1) * ok.any(-1, keepdim=True).to(acc)
        out[..., s:e, :] = (p @ vb).to(out.dtype)
    return out
