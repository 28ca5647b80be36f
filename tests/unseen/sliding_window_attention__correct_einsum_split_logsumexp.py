"""
BUG: none
Style: flattens leading dims, then per query block computes two separate einsum score tiles
(sink prefix and key band, plain slicing, no unfold), normalises them jointly with a
logsumexp over both tiles, and mixes the two value slices with einsum.
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    for _name, _n in (("window", window), ("num_sinks", num_sinks), ("block_size", block_size)):
        if isinstance(_n, bool) or not isinstance(_n, int):
            raise ValueError(f"{_name} must be an int, got {_n!r}")
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
        raise ValueError("inconsistent feature or sequence sizes")

    Tq, d = queries.shape[-2:]
    Tk, dv = values.shape[-2:]
    L = math.prod(lead)
    q3 = queries.reshape(L, Tq, d)
    k3 = keys.reshape(L, Tk, d)
    v3 = values.reshape(L, Tk, dv)
    ct = torch.float64 if queries.dtype == torch.float64 else torch.float32
    fmin = torch.finfo(ct).min
    scale = 1.0 / math.sqrt(d)
    dev = queries.device
    diag = Tk - Tq

    rows = []
    for r0 in range(0, Tq, block_size):
        r1 = min(r0 + block_size, Tq)
        qi = q3[:, r0:r1].to(ct)
        qpos = torch.arange(r0 + diag, r1 + diag, device=dev)
        a = max(r0 + diag - window + 1, 0)
        b = min(r1 + diag, Tk)
        if b <= 0:
            rows.append(q3.new_zeros(q3.shape[0], r1 - r0, dv))
            continue
        n_s = min(num_sinks, a)

        # sink tile: every sink before the band is already in the past of every row
        s_sink = torch.einsum("bqd,bkd->bqk", qi, k3[:, :n_s].to(ct)) * scale
        # band tile
        kpos = torch.arange(a, b, device=dev)
        band_ok = (kpos[None, :] <= qpos[:, None]) & (
            (kpos[None, :] > qpos[:, None] - window) | (kpos[None, :] < num_sinks)
        )
        s_band = torch.einsum("bqd,bkd->bqk", qi, k3[:, a:b].to(ct)) * scale
        s_band = s_band.masked_fill(~band_ok, fmin)

        row_ok = band_ok.any(dim=-1) | (n_s > 0)
        lse = torch.logsumexp(torch.cat([s_sink, s_band], dim=-1), dim=-1, keepdim=True)
        p_sink = torch.exp(s_sink - lse)
        p_band = torch.exp(s_band - lse) * band_ok
        o = torch.einsum("bqk,bkv->bqv", p_sink, v3[:, :n_s].to(ct)) + torch.einsum(
            "bqk,bkv->bqv", p_band, v3[:, a:b].to(ct)
        )
        o = o * row_ok[None, :, None]
        rows.append(o.to(queries.dtype))

    if rows:
        out = torch.cat(rows, dim=1)
    else:
        out = q3.new_zeros(q3.shape[0], 0, dv)
    return out.reshape(lead + (Tq, dv))
