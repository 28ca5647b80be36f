"""STYLE: CS231n-style manual backward with a plain exp / sum softmax
BUG: the softmax is computed as exp(S) / sum(exp(S)) without subtracting the row max, so large scores overflow to inf/NaN.
STAGE: weights
WHEN: scaled scores above ~88 in float32 (~709 in float64), e.g. the 1e4-magnitude stability case
"""
import math

import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    Tq, Tk, d = queries.shape[-2], keys.shape[-2], queries.shape[-1]
    ctype = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    Q = queries.to(ctype)
    K = keys.to(ctype)
    V = values.to(ctype)
    dO = grad_output.to(ctype)
    c = 1.0 / math.sqrt(d)

    scores = Q @ K.transpose(-1, -2) * c
    expo = torch.exp(scores)
    if is_causal:
        allowed = torch.arange(Tk, device=Q.device)[None, :] <= torch.arange(Tq, device=Q.device)[:, None] + (Tk - Tq)
        expo = expo * allowed
    total = expo.sum(-1, keepdim=True)
    P = expo / torch.where(total > 0, total, torch.ones_like(total))
    O = P @ V

    dV = P.transpose(-1, -2) @ dO
    dP = dO @ V.transpose(-1, -2)
    D = (dO * O).sum(-1, keepdim=True)
    dS = P * (dP - D) * c
    dQ = dS @ K
    dK = dS.transpose(-1, -2) @ Q
    return dQ.to(queries.dtype), dK.to(keys.dtype), dV.to(values.dtype)
