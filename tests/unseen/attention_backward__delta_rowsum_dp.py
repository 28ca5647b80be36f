"""STYLE: textbook softmax-Jacobian derivation in matmul form (dV = P^T dO, dP = dO V^T, dS = P * (dP - D))
BUG: the correction term D is taken as rowsum(dP) instead of rowsum(P * dP) = rowsum(dO * O).
STAGE: D
WHEN: always (dQ and dK; dV is right)
"""
import math

import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    dt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    Q, K, V, dO = queries.to(dt), keys.to(dt), values.to(dt), grad_output.to(dt)
    scale = 1.0 / math.sqrt(d)

    S = torch.matmul(Q, K.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(Tq, Tk, dtype=torch.bool, device=Q.device).tril(diagonal=Tk - Tq)
        S = S.masked_fill(~keep, float("-inf"))
    row_max = S.max(dim=-1, keepdim=True).values
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    E = torch.exp(S - row_max)
    Z = E.sum(dim=-1, keepdim=True)
    P = E / torch.where(Z == 0, torch.ones_like(Z), Z)

    dV = torch.matmul(P.transpose(-2, -1), dO)
    dP = torch.matmul(dO, V.transpose(-2, -1))
    D = dP.sum(dim=-1, keepdim=True)
    dS = P * (dP - D)
    dQ = torch.matmul(dS, K) * scale
    dK = torch.matmul(dS.transpose(-2, -1), Q) * scale
    return dQ.to(queries.dtype), dK.to(keys.dtype), dV.to(values.dtype)
