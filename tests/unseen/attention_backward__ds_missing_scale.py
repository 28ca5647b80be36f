"""STYLE: einsum-based manual backward (nanoGPT-style "backprop ninja" exercise)
BUG: dQ and dK are computed from dS without the 1/sqrt(d) factor of the forward's scaling.
STAGE: dQ
WHEN: always (dQ and dK are sqrt(d) times too large; dV is right)
"""
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    n_q, d = queries.shape[-2], queries.shape[-1]
    n_k = keys.shape[-2]
    work = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    q = queries.to(work)
    k = keys.to(work)
    v = values.to(work)
    dout = grad_output.to(work)

    att = torch.einsum("...id,...jd->...ij", q, k) * d ** -0.5
    if is_causal:
        i = torch.arange(n_q, device=q.device)[:, None]
        j = torch.arange(n_k, device=q.device)[None, :]
        att = att.masked_fill(j > i + (n_k - n_q), float("-inf"))
    mx = att.amax(-1, keepdim=True)
    mx = torch.nan_to_num(mx, neginf=0.0)
    att = torch.exp(att - mx)
    norm = att.sum(-1, keepdim=True)
    att = att / norm.clamp_min(torch.finfo(work).tiny)
    out = torch.einsum("...ij,...jd->...id", att, v)

    dv = torch.einsum("...ij,...id->...jd", att, dout)
    datt = torch.einsum("...id,...jd->...ij", dout, v)
    dpre = att * (datt - (dout * out).sum(-1, keepdim=True))
    dq = torch.einsum("...ij,...jd->...id", dpre, k)
    dk = torch.einsum("...ij,...id->...jd", dpre, q)
    return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)
