"""BUG: scores not scaled by 1/sqrt(d) to the sinks and to the local window, each with its log-sum-exp, then merge the two partial results; einsum and torch.where masks)
STAGE: the catalogue's no_scaling
"""
import math
import torch


def _partial(q, k, v, allowed, scale):
    # returns (out, lse) of softmax attention over allowed keys; lse = -inf on empty rows
    s = torch.einsum("...qd,...kd->...qk", q, k) * scale
    s = torch.where(allowed, s, torch.full_like(s, float("-inf")))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.where(allowed, torch.exp(torch.where(allowed, s, m) - m), torch.zeros_like(s))
    z = e.sum(-1, keepdim=True)
    zs = torch.where(z > 0, z, torch.ones_like(z))
    out = torch.einsum("...qk,...kd->...qd", e / zs, v)
    lse = torch.where(z > 0, torch.log(zs) + m, torch.full_like(z, float("-inf")))
    return out, lse


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError("window >= 1, num_sinks >= 0 and block_size >= 1 are required")
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    dt = queries.dtype
    ct = torch.float32 if dt in (torch.float16, torch.bfloat16) else dt
    scale = 1.0
    dev = queries.device
    res = []
    for b0 in range(0, Tq, block_size):
        b1 = min(b0 + block_size, Tq)
        q = queries[..., b0:b1, :].to(ct)
        pos = torch.arange(b0, b1, device=dev) + (Tk - Tq)
        lo = max(0, b0 + Tk - Tq - window + 1)
        hi = min(Tk, b1 + Tk - Tq)                  # exclusive
        parts = []
        if hi > lo:
            j = torch.arange(lo, hi, device=dev)
            ok = (j[None, :] <= pos[:, None]) & ((j[None, :] > pos[:, None] - window) | (j[None, :] < num_sinks))
            parts.append(_partial(q, keys[..., lo:hi, :].to(ct), values[..., lo:hi, :].to(ct), ok, scale))
        n_s = min(num_sinks, lo)
        if n_s > 0:
            ok = torch.ones(b1 - b0, n_s, dtype=torch.bool, device=dev)
            parts.append(_partial(q, keys[..., :n_s, :].to(ct), values[..., :n_s, :].to(ct), ok, scale))
        if not parts:
            res.append(queries.new_zeros(*queries.shape[:-2], b1 - b0, values.shape[-1]))
            continue
        out, lse = parts[0]
        for o2, l2 in parts[1:]:
            new = torch.logaddexp(lse, l2)
            safe = torch.where(torch.isfinite(new), new, torch.zeros_like(new))
            w1 = torch.where(torch.isfinite(lse), torch.exp(lse - safe), torch.zeros_like(lse))
            w2 = torch.where(torch.isfinite(l2), torch.exp(l2 - safe), torch.zeros_like(l2))
            out = w1 * out + w2 * o2
            lse = new
        res.append(out.to(dt))
    return torch.cat(res, dim=-2)
