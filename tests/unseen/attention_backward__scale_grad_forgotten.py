"""BUG: the 1/sqrt(d) factor of S = QK^T/sqrt(d) is used in the forward recomputation but forgotten in the chain rule: dQ = dS K and dK = dS^T Q (both too large by sqrt(d)); dV is right. Differs on any input with d != 1.
STAGE: the gradients (grad_queries, grad_keys); P, O and dV agree
STYLE: a hand-written backward as in CS231n-style assignments (softmax_backward helper)
"""
import math
import torch


def _softmax_backward(p, dp):
    return p * (dp - (p * dp).sum(dim=-1, keepdim=True))


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    dtype = queries.dtype
    cd = torch.promote_types(dtype, torch.float32)
    q, k, v, do = (t.to(cd) for t in (queries, keys, values, grad_output))
    Tq, Tk = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        keep = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
        s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    dv = p.transpose(-1, -2) @ do
    ds = _softmax_backward(p, do @ v.transpose(-1, -2))
    dq = ds @ k
    dk = ds.transpose(-1, -2) @ q
    return dq.to(dtype), dk.to(dtype), dv.to(dtype)
