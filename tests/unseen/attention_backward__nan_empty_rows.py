"""BUG: a plain softmax over an all -inf row: NaN where causal and Tq > Tk
STYLE: FlashAttention-2 formulas
"""
"""Standard attention backward (FlashAttention-2 paper, Algorithm 2 without the tiling)."""
import math

import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    Tq, Tk = queries.shape[-2], keys.shape[-2]
    scale = 1.0 / math.sqrt(queries.shape[-1])
    S = torch.matmul(queries, keys.transpose(-1, -2)) * scale
    if is_causal:
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=queries.device).tril(Tk - Tq)
        S = S.masked_fill(~allowed, float("-inf"))
    P = torch.softmax(S, dim=-1)
    O = torch.matmul(P, values)
    dV = torch.matmul(P.transpose(-1, -2), grad_output)
    dP = torch.matmul(grad_output, values.transpose(-1, -2))
    D = (grad_output * O).sum(dim=-1, keepdim=True)           # rowsum(dO * O) = rowsum(P * dP)
    dS = P * (dP - D)
    dQ = torch.matmul(dS, keys) * scale
    dK = torch.matmul(dS.transpose(-1, -2), queries) * scale
    return dQ, dK, dV
