"""BUG: values right, but the softmax Jacobian diag(p) - p p^T is built whole, (..., Tq, Tk, Tk): 2.3 GB at Tk = 1031, past what a worker may allocate
STYLE: explicit Jacobian in float64
"""
import math

import torch


def _probs(q, k, is_causal):
    Tq, Tk = q.shape[-2], k.shape[-2]
    s = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    i = torch.arange(Tq, device=q.device).unsqueeze(-1)
    j = torch.arange(Tk, device=q.device).unsqueeze(0)
    allowed = (j <= i + (Tk - Tq)) if is_causal else torch.ones_like(s, dtype=torch.bool)
    s = torch.where(allowed, s, torch.full_like(s, -math.inf))
    mx = s.max(-1, keepdim=True).values.nan_to_num(neginf=0.0)
    e = torch.exp(s - mx)
    return e / e.sum(-1, keepdim=True).clamp_min(1e-300)


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    """Backward through the softmax with its explicit Jacobian diag(p) - p p^T, in float64."""
    q, k, v, g = (t.to(torch.float64) for t in (queries, keys, values, grad_output))
    scale = 1.0 / math.sqrt(q.shape[-1])
    p = _probs(q, k, is_causal)                                  # (..., Tq, Tk)
    grad_v = torch.einsum("...ij,...iv->...jv", p, g)
    grad_p = torch.einsum("...iv,...jv->...ij", g, v)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., Tq, Tk, Tk)
    grad_s = torch.einsum("...ij,...ijk->...ik", grad_p, jac)
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, k) * scale
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, q) * scale
    return grad_q.to(queries.dtype), grad_k.to(keys.dtype), grad_v.to(values.dtype)
