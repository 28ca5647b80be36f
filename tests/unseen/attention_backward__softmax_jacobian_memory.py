"""BUG: values right, but the softmax Jacobian is built whole, (..., Tq, Tk, Tk) per head: 2.3 GB at Tk = 1031, past what the worker may allocate; the contract's sizes need the rowsum(dO * O) form
STAGE: the memory of an intermediate
STYLE: textbook derivation with the explicit softmax Jacobian J = diag(p) - p p^T per row, contracted as dS_ik = sum_j dP_ij J_ijk (einsum), instead of the rowsum(dO*O) shortcut.
"""
import math
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    dtype = queries.dtype
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    Q, K, V, dO = (t.to(wide) for t in (queries, keys, values, grad_output))
    d = Q.shape[-1]
    Tq, Tk = Q.shape[-2], K.shape[-2]
    S = torch.einsum('...id,...jd->...ij', Q, K) / math.sqrt(d)
    if is_causal:
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=Q.device).tril(diagonal=Tk - Tq)
    else:
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=Q.device)
    S = torch.where(allowed, S, torch.full_like(S, -torch.inf))
    has = allowed.any(dim=-1, keepdim=True)
    S = torch.where(has, S, torch.zeros_like(S))
    P = torch.softmax(S, dim=-1) * has
    dV = torch.einsum('...ij,...id->...jd', P, dO)
    dP = torch.einsum('...id,...jd->...ij', dO, V)
    J = torch.diag_embed(P) - P.unsqueeze(-1) * P.unsqueeze(-2)          # (..., Tq, Tk, Tk)
    dS = torch.einsum('...ij,...ijk->...ik', dP, J)
    dQ = torch.einsum('...ik,...kd->...id', dS, K) / math.sqrt(d)
    dK = torch.einsum('...ik,...id->...kd', dS, Q) / math.sqrt(d)
    return dQ.to(dtype), dK.to(dtype), dV.to(dtype)
