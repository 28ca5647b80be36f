"""STYLE: compact reference backward using torch.softmax on a -inf masked score matrix
BUG: rows with no allowed key go through torch.softmax on an all -inf row, which gives NaN, and the NaN spreads into dK and dV.
STAGE: weights
WHEN: is_causal with Tq > Tk (rows with no allowed key)
"""
import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    Tq, Tk, d = queries.shape[-2], keys.shape[-2], queries.shape[-1]
    work = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    q, k, v, do = (x.to(work) for x in (queries, keys, values, grad_output))
    scale = d ** -0.5

    s = q @ k.mT * scale
    if is_causal:
        mask = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = p @ v

    dv = p.mT @ do
    dp = do @ v.mT
    ds = p * (dp - (do * o).sum(-1, keepdim=True))
    dq = (ds @ k) * scale
    dk = (ds.mT @ q) * scale
    return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)
