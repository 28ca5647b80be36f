"""Attention backward one query row at a time: each row's softmax Jacobian diag(p) - p p^T, built explicitly."""
import math

import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    Tq, Tk, d = queries.shape[-2], keys.shape[-2], queries.shape[-1]
    dq_rows = []
    dk = torch.zeros_like(keys)
    dv = torch.zeros_like(values)
    for i in range(Tq):
        n = Tk if not is_causal else max(0, min(Tk, i + Tk - Tq + 1))  # keys 0..n-1 are allowed
        q, do = queries[..., i, :], grad_output[..., i, :]
        if n == 0:
            dq_rows.append(torch.zeros_like(q))
            continue
        k, v = keys[..., :n, :], values[..., :n, :]
        s = (k @ q.unsqueeze(-1)).squeeze(-1) / math.sqrt(d)  # (..., n)
        p = torch.softmax(s, dim=-1)
        jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
        dp = (v @ do.unsqueeze(-1)).squeeze(-1)
        ds = (jac @ dp.unsqueeze(-1)).squeeze(-1)
        dq_rows.append((ds.unsqueeze(-2) @ k).squeeze(-2) / math.sqrt(d))
        dk = dk + torch.nn.functional.pad(ds.unsqueeze(-1) * q.unsqueeze(-2) / math.sqrt(d), (0, 0, 0, Tk - n))
        dv = dv + torch.nn.functional.pad(p.unsqueeze(-1) * do.unsqueeze(-2), (0, 0, 0, Tk - n))
    return torch.stack(dq_rows, dim=-2), dk, dv
