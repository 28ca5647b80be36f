"""BUG: none
STYLE: serving-code style: each query block's key indices gathered (sinks, then the window), the mask built from positions.
"""
import math
import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    """Query blocks against their contiguous key range plus the sinks; masks from positions."""
    for _name, _n in (("window", window), ("num_sinks", num_sinks), ("block_size", block_size)):
        if isinstance(_n, bool) or not isinstance(_n, int):
            raise ValueError(f"{_name} must be an int, got {_n!r}")
    if window < 1:
        raise ValueError("window must be >= 1")
    if num_sinks < 0:
        raise ValueError("num_sinks must be >= 0")
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    off = Tk - Tq
    dev = queries.device
    cdt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    scale = 1.0 / math.sqrt(d)
    outs = []
    for qs in range(0, Tq, block_size):
        qe = min(qs + block_size, Tq)
        p_lo, p_hi = qs + off, qe - 1 + off
        lo = max(0, p_lo - window + 1)
        hi = min(Tk, p_hi + 1)
        if hi <= 0:
            outs.append(torch.zeros((*queries.shape[:-2], qe - qs, dv), dtype=queries.dtype, device=dev))
            continue
        n_s = min(num_sinks, lo)
        idx = torch.cat([torch.arange(0, n_s, device=dev), torch.arange(lo, hi, device=dev)])
        k = torch.cat([keys[..., :n_s, :], keys[..., lo:hi, :]], dim=-2).to(cdt)
        v = torch.cat([values[..., :n_s, :], values[..., lo:hi, :]], dim=-2).to(cdt)
        q = queries[..., qs:qe, :].to(cdt)
        pos = torch.arange(p_lo, p_hi + 1, device=dev)[:, None]
        j = idx[None, :]
        allowed = (j <= pos) & ((j > pos - window) | (j < num_sinks))
        s = (q @ k.transpose(-1, -2)) * scale
        s = s.masked_fill(~allowed, float("-inf"))
        w = torch.softmax(s, dim=-1)
        w = w.masked_fill(~allowed.any(-1, keepdim=True), 0.0)
        outs.append((w @ v).to(queries.dtype))
    return torch.cat(outs, dim=-2)
