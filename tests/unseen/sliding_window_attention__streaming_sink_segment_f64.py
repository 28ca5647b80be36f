"""BUG: none
STYLE: a sink segment and a window segment merged with an online softmax (StreamingLLM), float64 inside
"""
"""StreamingLLM-style attention: a sink segment and a window segment per query block, merged
with an online softmax. Internally float64 (cast back at the end); leading dims flattened.
"""
import math

import torch


def _validate(window, num_sinks, block_size):
    for name, val, low in (("window", window, 1), ("num_sinks", num_sinks, 0), ("block_size", block_size, 1)):
        if type(val) is not int or val < low:
            raise ValueError(f"{name}={val!r}: expected an int >= {low}")


class _Online:
    """Running max / sum / accumulator of one block of query rows."""

    def __init__(self, L, n, dv, dtype, device):
        self.m = torch.full((L, n, 1), -math.inf, dtype=dtype, device=device)
        self.l = torch.zeros(L, n, 1, dtype=dtype, device=device)
        self.acc = torch.zeros(L, n, dv, dtype=dtype, device=device)

    def add(self, s, ok, v):
        s = torch.where(ok, s, torch.tensor(-math.inf, dtype=s.dtype, device=s.device))
        m_new = torch.maximum(self.m, s.amax(-1, keepdim=True)).detach()
        m0 = torch.where(m_new > -math.inf, m_new, torch.zeros_like(m_new))
        p = torch.exp(s - m0)
        c = torch.exp(self.m - m0)
        self.l = self.l * c + p.sum(-1, keepdim=True)
        self.acc = self.acc * c + torch.einsum("lqk,lkd->lqd", p, v)
        self.m = m_new

    def result(self):
        return self.acc / torch.where(self.l > 0, self.l, torch.ones_like(self.l))


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    _validate(window, num_sinks, block_size)
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk, dv = keys.shape[-2], values.shape[-1]
    lead = queries.shape[:-2]
    f64 = torch.float64
    q = queries.reshape(-1, Tq, d).to(f64)
    k = keys.reshape(-1, Tk, d).to(f64)
    v = values.reshape(-1, Tk, dv).to(f64)
    L, dev = q.shape[0], queries.device
    off = Tk - Tq
    out = torch.zeros(L, Tq, dv, dtype=f64, device=dev)
    for b0 in range(0, Tq, block_size):
        b1 = min(b0 + block_size, Tq)
        pos = torch.arange(b0 + off, b1 + off, device=dev).view(-1, 1)
        start = max(0, b0 + off - window + 1)
        stop = min(Tk, b1 + off)
        if stop <= 0:
            continue
        qb = q[:, b0:b1] / math.sqrt(d)
        st = _Online(L, b1 - b0, dv, f64, dev)
        n_sink = min(num_sinks, start)
        if n_sink > 0:  # sinks left of the window range: visible to every row with pos >= j
            js = torch.arange(0, n_sink, device=dev).view(1, -1)
            st.add(torch.einsum("lqd,lkd->lqk", qb, k[:, :n_sink]), js <= pos, v[:, :n_sink])
        if stop > start:
            jw = torch.arange(start, stop, device=dev).view(1, -1)
            ok = (jw <= pos) & ((jw > pos - window) | (jw < num_sinks))
            st.add(torch.einsum("lqd,lkd->lqk", qb, k[:, start:stop]), ok, v[:, start:stop])
        out[:, b0:b1] = st.result()
    return out.reshape(*lead, Tq, dv).to(queries.dtype)
