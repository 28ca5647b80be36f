"""A "fast path" that treats the call as plain causal attention when the window covers every query (window >= Tq, no sinks). BUG: it compares the window with Tq, not Tk: a decoding step (one query after a long prefix) then sees keys far outside its window. Departs at the mask."""
import math
import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError("bad window / num_sinks / block_size")
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    dev = queries.device
    cdt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    scale = 1.0 / math.sqrt(d)
    off = Tk - Tq
    outs = []
    if window >= Tq and num_sinks == 0:
        window = Tk + Tq
    for qs in range(0, Tq, block_size):
        qb = queries[..., qs:qs + block_size, :].to(cdt)
        nq = qb.shape[-2]
        pos_lo, pos_hi = qs + off, qs + nq - 1 + off
        klo = max(0, pos_lo - window + 1)
        khi = max(0, min(Tk, pos_hi + 1))
        klo = min(klo, khi)
        ns = min(num_sinks, klo)
        idx = torch.cat([torch.arange(0, ns, device=dev), torch.arange(klo, khi, device=dev)])
        kb = torch.cat([keys[..., :ns, :], keys[..., klo:khi, :]], dim=-2).to(cdt)
        vb = torch.cat([values[..., :ns, :], values[..., klo:khi, :]], dim=-2).to(cdt)
        pos = torch.arange(pos_lo, pos_hi + 1, device=dev)[:, None]
        j = idx[None, :]
        allowed = (j <= pos) & ((j > pos - window) | (j < num_sinks))
        s = (qb @ kb.transpose(-1, -2)) * scale
        s = s.masked_fill(~allowed, float("-inf"))
        m = s.amax(-1, keepdim=True).detach() if s.shape[-1] > 0 else torch.zeros((*s.shape[:-1], 1), dtype=cdt, device=dev)
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
        e = torch.exp(s - m)
        z = e.sum(-1, keepdim=True)
        w = e / torch.where(z > 0, z, torch.ones_like(z))
        outs.append(w @ vb)
    return torch.cat(outs, dim=-2).to(queries.dtype)
