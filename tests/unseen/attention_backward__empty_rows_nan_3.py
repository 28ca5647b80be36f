"""BUG: with is_causal and Tq > Tk the first rows have no allowed key; softmax of an all -inf row is NaN and it is never zeroed, so NaN spreads into dQ, dK, dV.
STAGE: the softmax
"""
import math

import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    in_dtype = queries.dtype
    work = torch.float32 if in_dtype in (torch.float16, torch.bfloat16) else in_dtype
    q, k, v, do = (t.to(work) for t in (queries, keys, values, grad_output))

    Tq, Tk = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])

    # forward recomputation
    S = torch.matmul(q, k.transpose(-2, -1)) * scale
    if is_causal:
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(diagonal=Tk - Tq)
        S = S.masked_fill(~allowed, float("-inf"))
        P = torch.softmax(S, dim=-1)
    else:
        P = torch.softmax(S, dim=-1)

    # O = P V
    dV = torch.matmul(P.transpose(-2, -1), do)
    dP = torch.matmul(do, v.transpose(-2, -1))

    # softmax Jacobian: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik)
    dS = P * (dP - (dP * P).sum(dim=-1, keepdim=True))

    # S = scale * Q K^T
    dQ = torch.matmul(dS, k) * scale
    dK = torch.matmul(dS.transpose(-2, -1), q) * scale

    return dQ.to(in_dtype), dK.to(in_dtype), dV.to(in_dtype)
