"""Blocks of queries with einsum; the block's keys sliced as one range that starts at the first sink or at the window."""
import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (window, num_sinks, block_size)):
        raise ValueError("window, num_sinks and block_size are ints")
    if min(window, block_size) < 1 or num_sinks < 0:
        raise ValueError("bad window, num_sinks or block_size")
    *lead, Tq, d = queries.shape
    Tk = keys.shape[-2]
    out = queries.new_zeros(*lead, Tq, values.shape[-1])
    for a in range(0, Tq, block_size):
        b = min(a + block_size, Tq)
        p0, p1 = a + Tk - Tq, b - 1 + Tk - Tq  # positions of the block's first and last query
        if p1 < 0:
            continue
        w0 = max(0, p0 - window + 1)
        parts = [(0, min(num_sinks, w0)), (w0, p1 + 1)]
        ks = torch.cat([keys[..., x:y, :] for x, y in parts], -2)
        vs = torch.cat([values[..., x:y, :] for x, y in parts], -2)
        kp = torch.cat([torch.arange(x, y) for x, y in parts]).to(queries.device)
        qp = torch.arange(p0, p1 + 1, device=queries.device)
        ok = (kp <= qp[:, None]) & ((kp > qp[:, None] - window) | (kp < num_sinks))
        s = torch.einsum("...qd,...kd->...qk", queries[..., a:b, :], ks) * d ** -0.5
        s = s.masked_fill(~ok, float("-inf"))
        m = s.amax(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).min)  # a row of -inf stays finite
        e = torch.exp(s - m)
        den = e.sum(-1, keepdim=True)
        p = e / torch.where(den > 0, den, torch.ones_like(den))
        out[..., a:b, :] = torch.einsum("...qk,...kv->...qv", p, vs)
    return out
