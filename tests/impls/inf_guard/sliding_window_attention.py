"""Each block of queries walks its keys in sub-blocks with an online softmax (FlashAttention inside the window)."""
import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    for name, n in (("window", window), ("num_sinks", num_sinks), ("block_size", block_size)):
        if type(n) is not int:  # a bool is no window, a float no count
            raise ValueError(f"sliding_window_attention: {name} = {n!r} is not an int")
    if window < 1 or num_sinks < 0 or block_size < 1:
        raise ValueError("sliding_window_attention: invalid window, num_sinks or block_size")
    Tq, Tk, dv = queries.shape[-2], keys.shape[-2], values.shape[-1]
    scale = queries.shape[-1] ** -0.5
    outs = []
    for q0 in range(0, Tq, block_size):
        q = queries[..., q0:q0 + block_size, :] * scale
        qp = torch.arange(q0, q0 + q.shape[-2], device=q.device) + (Tk - Tq)
        lo = max(0, q0 + Tk - Tq - window + 1)
        hi = min(Tk, q0 + q.shape[-2] + Tk - Tq)
        spans = [(0, min(num_sinks, lo))] + [(s, min(s + 7, hi)) for s in range(lo, hi, 7)]
        m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-1], dv, dtype=q.dtype, device=q.device)
        for s0, s1 in spans:
            if s1 <= s0:
                continue
            kp = torch.arange(s0, s1, device=q.device)
            ok = (kp <= qp[:, None]) & ((kp > qp[:, None] - window) | (kp < num_sinks))
            sc = (q @ keys[..., s0:s1, :].transpose(-1, -2)).masked_fill(~ok, float("-inf"))
            m_new = torch.maximum(m, sc.amax(-1))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(sc - safe[..., None])
            alpha = torch.exp(m - safe)
            l = l * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ values[..., s0:s1, :]
            m = m_new
        outs.append(acc / torch.where(l > 0, l, torch.ones_like(l))[..., None])
    return torch.cat(outs, -2)
