"""
BUG: none
Style: index arithmetic with torch.where: one arange per block is mapped onto [sinks | band]
key ids, keys are gathered with index_select, masking uses finfo.min and a row-validity factor,
and block results are written into a preallocated output.
"""
import math

import torch
import torch.nn.functional as F


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    for _name, _n in (("window", window), ("num_sinks", num_sinks), ("block_size", block_size)):
        if isinstance(_n, bool) or not isinstance(_n, int):
            raise ValueError(f"{_name} must be an int, got {_n!r}")
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError(
            f"need window >= 1, num_sinks >= 0, block_size >= 1; got {window}, {num_sinks}, {block_size}"
        )
    if queries.dim() != keys.dim() or keys.dim() != values.dim():
        raise ValueError("queries, keys, values must have the same rank")
    if queries.shape[:-2] != keys.shape[:-2] or queries.shape[:-2] != values.shape[:-2]:
        raise ValueError("leading dims differ")
    if queries.shape[-1] != keys.shape[-1] or keys.shape[-2] != values.shape[-2]:
        raise ValueError("incompatible shapes")

    Tq, d = queries.shape[-2:]
    Tk, dv = values.shape[-2:]
    shift = Tk - Tq
    dev = queries.device
    acc_dtype = queries.dtype if queries.dtype == torch.float64 else torch.float32
    neg = torch.finfo(acc_dtype).min
    inv_sqrt_d = d ** -0.5

    out = queries.new_zeros(queries.shape[:-2] + (Tq, dv))
    for s in range(0, Tq, block_size):
        e = min(s + block_size, Tq)
        lo = max(s + shift - window + 1, 0)
        hi = min(e + shift, Tk)
        if hi <= 0:
            continue  # rows before the first key stay 0
        ns = min(num_sinks, lo)
        width = ns + (hi - lo)
        t = torch.arange(width, device=dev)
        key_idx = torch.where(t < ns, t, t - ns + lo)

        q_pos = torch.arange(s, e, device=dev).unsqueeze(-1) + shift
        causal = key_idx <= q_pos
        in_window = key_idx > q_pos - window
        is_sink = key_idx < num_sinks
        ok = causal & (in_window | is_sink)

        kb = keys.index_select(-2, key_idx).to(acc_dtype)
        vb = values.index_select(-2, key_idx).to(acc_dtype)
        qb = queries[..., s:e, :].to(acc_dtype)

        logits = (qb @ kb.transpose(-1, -2)) * inv_sqrt_d
        logits = torch.where(ok, logits, torch.full_like(logits, neg))
        p = F.softmax(logits, dim=-1)
        p = p * ok.any(-1, keepdim=True).to(acc_dtype)
        out[..., s:e, :] = (p @ vb).to(out.dtype)
    return out
