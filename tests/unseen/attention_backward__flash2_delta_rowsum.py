"""BUG: none
STYLE: FlashAttention-2's backward math on whole tensors: P from the logsumexp, D = rowsum(dO * O), dS = P * (dP - D).
"""
import math
import torch


def _forward_stats(q, k, v, causal, scale):
    s = torch.einsum("...id,...jd->...ij", q, k) * scale
    if causal:
        tq, tk = s.shape[-2:]
        i = torch.arange(tq, device=s.device)[:, None]
        j = torch.arange(tk, device=s.device)[None, :]
        s = torch.where(j <= i + (tk - tq), s, torch.tensor(float("-inf"), dtype=s.dtype, device=s.device))
    lse = torch.logsumexp(s, dim=-1)  # -inf on an empty row
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    o = torch.einsum("...ij,...jv->...iv", p, v)
    return p, o


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    """FlashAttention-2 backward math: D = rowsum(dO * O), dS = P * (dP - D)."""
    scale = queries.shape[-1] ** -0.5
    wide = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    q, k, v, do = (x.to(wide) for x in (queries, keys, values, grad_output))
    p, o = _forward_stats(q, k, v, is_causal, scale)
    D = (do * o).sum(-1)
    dv = torch.einsum("...ij,...iv->...jv", p, do)
    dp = torch.einsum("...iv,...jv->...ij", do, v)
    ds = p * (dp - D[..., None])
    dq = torch.einsum("...ij,...jd->...id", ds, k) * scale
    dk = torch.einsum("...ij,...id->...jd", ds, q) * scale
    return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)
