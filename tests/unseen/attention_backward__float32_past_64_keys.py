"""Computes in float32 when Tk > 64, also for float64 inputs.
BUG: computes in float32 when Tk > 64, also for float64 inputs."""
import math
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    cdt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    if keys.shape[-2] > 64:
        cdt = torch.float32  # long contexts: save memory
    q, k, v, do = (t.to(cdt) for t in (queries, keys, values, grad_output))
    Tq, d = q.shape[-2:]
    Tk = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    s = (q @ k.transpose(-1, -2)) * scale
    if is_causal:
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
        s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    P = e / torch.where(z > 0, z, torch.ones_like(z))
    dV = P.transpose(-1, -2) @ do
    dP = do @ v.transpose(-1, -2)
    D = (dP * P).sum(-1, keepdim=True)
    dS = P * (dP - D)
    dQ = (dS @ k) * scale
    dK = (dS.transpose(-1, -2) @ q) * scale
    return dQ.to(queries.dtype), dK.to(keys.dtype), dV.to(values.dtype)
