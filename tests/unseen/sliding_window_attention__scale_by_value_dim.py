"""
BUG: scores are scaled by 1/sqrt(dv) (the value/head width taken from values.shape[-1]) instead of 1/sqrt(d), which is wrong whenever dv != d.
STAGE: the score scaling
Style: flattened leading dims, einsum score tiles for sinks and band, joint logsumexp normalisation.
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1:
        raise ValueError("window must be >= 1")
    if num_sinks < 0:
        raise ValueError("num_sinks must be >= 0")
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    lead = tuple(queries.shape[:-2])
    if len(lead) > 2 or tuple(keys.shape[:-2]) != lead or tuple(values.shape[:-2]) != lead:
        raise ValueError("queries/keys/values must share 0, 1 or 2 leading dims")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("inconsistent sizes")

    Tq, d = queries.shape[-2:]
    Tk, head_dim = values.shape[-2:]
    L = math.prod(lead)
    q3, k3, v3 = queries.reshape(L, Tq, d), keys.reshape(L, Tk, d), values.reshape(L, Tk, head_dim)
    ct = torch.float64 if queries.dtype == torch.float64 else torch.float32
    fmin = torch.finfo(ct).min
    scale = head_dim ** -0.5
    dev = queries.device
    diag = Tk - Tq

    rows = []
    for r0 in range(0, Tq, block_size):
        r1 = min(r0 + block_size, Tq)
        a = max(r0 + diag - window + 1, 0)
        b = min(r1 + diag, Tk)
        if b <= 0:
            rows.append(q3.new_zeros(L, r1 - r0, head_dim))
            continue
        n_s = min(num_sinks, a)
        qi = q3[:, r0:r1].to(ct)
        qpos = torch.arange(r0 + diag, r1 + diag, device=dev)
        kpos = torch.arange(a, b, device=dev)
        ok = (kpos[None, :] <= qpos[:, None]) & (
            (kpos[None, :] > qpos[:, None] - window) | (kpos[None, :] < num_sinks)
        )
        s_sink = torch.einsum("bqd,bkd->bqk", qi, k3[:, :n_s].to(ct)) * scale
        s_band = torch.einsum("bqd,bkd->bqk", qi, k3[:, a:b].to(ct)) * scale
        s_band = s_band.masked_fill(~ok, fmin)
        lse = torch.logsumexp(torch.cat([s_sink, s_band], -1), -1, keepdim=True)
        o = torch.einsum("bqk,bkv->bqv", torch.exp(s_sink - lse), v3[:, :n_s].to(ct))
        o = o + torch.einsum("bqk,bkv->bqv", torch.exp(s_band - lse) * ok, v3[:, a:b].to(ct))
        rows.append(o.to(queries.dtype))
    out = torch.cat(rows, 1) if rows else q3.new_zeros(L, 0, head_dim)
    return out.reshape(lead + (Tq, head_dim))
