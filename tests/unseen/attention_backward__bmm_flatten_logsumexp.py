"""BUG: none
STYLE: leading dims flattened for torch.bmm/baddbmm, P recomputed as exp(S - logsumexp(S)) with empty rows guarded, results reshaped back.
"""
import math

import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    out_dtype = queries.dtype
    work_dtype = torch.promote_types(out_dtype, torch.float32)
    *lead, Tq, d = queries.shape
    Tk, dv = keys.shape[-2], values.shape[-1]

    Q = queries.reshape(-1, Tq, d).to(work_dtype)
    K = keys.reshape(-1, Tk, d).to(work_dtype)
    V = values.reshape(-1, Tk, dv).to(work_dtype)
    dO = grad_output.reshape(-1, Tq, dv).to(work_dtype)
    n = Q.shape[0]
    alpha = 1.0 / math.sqrt(d)

    if is_causal:
        bias = torch.zeros(Tq, Tk, dtype=work_dtype, device=Q.device)
        bias = bias.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool, device=Q.device).triu(Tk - Tq + 1), float("-inf"))
        S = torch.baddbmm(bias.expand(n, Tq, Tk), Q, K.transpose(1, 2), beta=1.0, alpha=alpha)
    else:
        S = torch.bmm(Q, K.transpose(1, 2)) * alpha

    lse = torch.logsumexp(S, dim=-1, keepdim=True)
    lse = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)  # row with no allowed key
    P = torch.exp(S - lse)  # exactly 0 on masked keys and on empty rows

    dV = torch.bmm(P.transpose(1, 2), dO)
    dP = torch.bmm(dO, V.transpose(1, 2))
    dS = P * (dP - (P * dP).sum(-1, keepdim=True))
    dQ = torch.bmm(dS, K) * alpha
    dK = torch.bmm(dS.transpose(1, 2), Q) * alpha

    return (
        dQ.reshape(*lead, Tq, d).to(out_dtype),
        dK.reshape(*lead, Tk, d).to(out_dtype),
        dV.reshape(*lead, Tk, dv).to(out_dtype),
    )
