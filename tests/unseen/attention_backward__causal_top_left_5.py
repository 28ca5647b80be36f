"""BUG: causal mask aligned top-left (j <= i, a torch.tril(ones(Tq, Tk)) buffer as in nanoGPT) instead of bottom-right (j <= i + Tk - Tq); differs on is_causal=True inputs with Tq != Tk.
STAGE: the mask
STYLE: nanoGPT's registered tril "bias" buffer sliced [:Tq, :Tk], with a dense manual backward
"""
import math
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    dtype = queries.dtype
    cd = torch.promote_types(dtype, torch.float32)
    q, k, v, do = (t.to(cd) for t in (queries, keys, values, grad_output))
    Tq, Tk = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.size(-1))
    att = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        n = max(Tq, Tk)
        bias = torch.tril(torch.ones(n, n, device=q.device))[:Tq, :Tk]
        att = att.masked_fill(bias == 0, float('-inf'))
    mx = att.amax(-1, keepdim=True)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    p = torch.exp(att - mx)
    p = p / p.sum(-1, keepdim=True).clamp_min(torch.finfo(cd).tiny)
    y = p @ v
    dv = p.transpose(-2, -1) @ do
    dp = do @ v.transpose(-2, -1)
    ds = p * (dp - (do * y).sum(-1, keepdim=True))
    dq = (ds @ k) * scale
    dk = (ds.transpose(-2, -1) @ q) * scale
    return dq.to(dtype), dk.to(dtype), dv.to(dtype)
