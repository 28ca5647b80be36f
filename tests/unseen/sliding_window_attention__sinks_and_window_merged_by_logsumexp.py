"""BUG: none
STYLE: the sinks and the window scored as two separate sets of keys, each with its own max and sum, merged by logsumexp (as split-KV kernels combine partial results); einsum.
"""
import torch


def _part(q, k, v, allowed, scale):
    """Unnormalised attention over one key set: (acc, lse) with lse=-inf where nothing is allowed."""
    s = torch.einsum("...id,...jd->...ij", q, k) * scale
    s = torch.where(allowed, s, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    safe = torch.where(torch.isneginf(lse), 0.0, lse)
    p = torch.exp(s - safe[..., None])
    return torch.einsum("...ij,...jv->...iv", p, v), lse


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    """StreamingLLM flavour: sinks and window scored separately, merged by their logsumexps."""
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError(f"invalid window={window}, num_sinks={num_sinks}, block_size={block_size}")
    tq, tk = queries.shape[-2], keys.shape[-2]
    wd = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    dev = queries.device
    scale = queries.shape[-1] ** -0.5
    res = []
    for b0 in range(0, tq, block_size):
        b1 = min(tq, b0 + block_size)
        pos = torch.arange(b0, b1, device=dev) + (tk - tq)
        q = queries[..., b0:b1, :].to(wd)
        lo = max(0, b0 + tk - tq - window + 1)
        hi = max(0, min(tk, b1 + tk - tq))
        parts = []
        # window part: keys lo..hi-1
        if hi > lo:
            j = torch.arange(lo, hi, device=dev)
            allowed = (j[None, :] <= pos[:, None]) & ((j[None, :] > pos[:, None] - window) | (j[None, :] < num_sinks))
            parts.append(_part(q, keys[..., lo:hi, :].to(wd), values[..., lo:hi, :].to(wd), allowed, scale))
        # sinks strictly before the window range (inside it they are already counted)
        ns = min(num_sinks, lo)
        if ns > 0:
            j = torch.arange(ns, device=dev)
            allowed = j[None, :] <= pos[:, None]
            parts.append(_part(q, keys[..., :ns, :].to(wd), values[..., :ns, :].to(wd), allowed, scale))
        if not parts:
            res.append(torch.zeros((*q.shape[:-1], values.shape[-1]), dtype=wd, device=dev))
            continue
        lses = torch.stack([l for _, l in parts], 0)
        tot = torch.logsumexp(lses, 0)
        tot_safe = torch.where(torch.isneginf(tot), 0.0, tot)
        out = 0
        for acc, l in parts:
            l_safe = torch.where(torch.isneginf(l), 0.0, l)
            coef = torch.where(torch.isneginf(l), 0.0, torch.exp(l_safe - tot_safe))
            out = out + acc * coef[..., None]
        res.append(out)
    return torch.cat(res, -2).to(queries.dtype)
